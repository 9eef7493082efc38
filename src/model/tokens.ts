/**
 * Token counting with a real BPE tokenizer (o200k_base, the GPT-4o/GPT-5 encoding).
 *
 * Only the o200k_base module is imported so startup loads one encoding, not all of them. Special
 * token strings such as `<|endoftext|>` are counted as ordinary text (the library would throw).
 * Nothing is cached here beyond the library's own bounded merge cache.
 *
 * Request counting is an estimate for budgeting (what count_tokens reports and what metering
 * reserves), not a reproduction of any provider's chat template:
 * - text, thinking, tool-call arguments (as JSON) and tool results: their tokens;
 * - an image: IMAGE_TOKENS; a PDF or URL document: DOCUMENT_TOKENS; a text document: its tokens;
 * - every message: MESSAGE_OVERHEAD_TOKENS more; every tool: its name, description and input
 *   schema JSON plus TOOL_OVERHEAD_TOKENS; a JSON-schema response format: its schema JSON;
 * - every request: REQUEST_OVERHEAD_TOKENS (reply priming).
 */
import { countTokens, decodeGenerator, encode } from "gpt-tokenizer/encoding/o200k_base"
import type { ContentBlock, Message } from "./content.ts"
import type { CanonicalRequest } from "./request.ts"

/** Flat cost of one image: the ceiling of a ~1.15 megapixel image on the Messages dialect. */
export const IMAGE_TOKENS = 1_600
/** Flat cost of one binary or URL document (a PDF of a couple of pages, text and page images). */
export const DOCUMENT_TOKENS = 3_000
/** Role markers and separators around each message. */
export const MESSAGE_OVERHEAD_TOKENS = 3
/** Framing of each tool definition. */
export const TOOL_OVERHEAD_TOKENS = 8
/** Priming of the assistant reply, once per request. */
export const REQUEST_OVERHEAD_TOKENS = 3

const asPlainText = { disallowedSpecial: new Set<string>() }

export const countTextTokens = (text: string): number => (text.length === 0 ? 0 : countTokens(text, asPlainText))

/** Token ids of a text. */
export const encodeText = (text: string): Array<number> => (text.length === 0 ? [] : encode(text, asPlainText))

/** A run of a text's tokens that decodes to whole characters. */
export interface TokenPiece {
  readonly text: string
  readonly tokens: number
}

/**
 * A text cut at its token boundaries: the pieces concatenate to the text and their `tokens` sum
 * to its token count. A character split over several tokens (emoji, CJK) stays whole in one piece.
 * Used to stream output token by token and to cut it at an exact token count.
 *
 * Why not `decode(ids.slice(...))`: the library decodes with one shared streaming TextDecoder, so a
 * slice that ends inside a character leaves bytes behind that corrupt the next decode anywhere in
 * the process. Decoding the whole sequence in one pass always ends on a character boundary.
 */
export const tokenPieces = (text: string): Array<TokenPiece> => {
  const ids = encodeText(text)
  let consumed = 0
  const counted = (function*() {
    for (const id of ids) {
      consumed++
      yield id
    }
  })()
  const pieces: Array<TokenPiece> = []
  let reported = 0
  for (const piece of decodeGenerator(counted)) {
    pieces.push({ text: piece, tokens: consumed - reported })
    reported = consumed
  }
  return pieces
}

export const countBlockTokens = (block: ContentBlock): number => {
  switch (block.type) {
    case "text":
      return countTextTokens(block.text)
    case "image":
      return IMAGE_TOKENS
    case "document":
      return block.source.kind === "text" ? countTextTokens(block.source.text) : DOCUMENT_TOKENS
    case "tool_use":
      return countTextTokens(block.name) + countTextTokens(JSON.stringify(block.input))
    case "tool_result":
      if (typeof block.content === "string") return countTextTokens(block.content)
      return block.content.reduce((sum, part) => sum + countBlockTokens(part), 0)
    case "thinking":
      return countTextTokens(block.thinking)
    case "redacted_thinking":
      // Opaque encrypted reasoning; its length in characters is the best available proxy.
      return Math.ceil(block.data.length / 4)
  }
}

export const countMessageTokens = (message: Message): number =>
  message.content.reduce((sum, block) => sum + countBlockTokens(block), MESSAGE_OVERHEAD_TOKENS)

/** Everything before the first message: system text, tool definitions, the response schema. */
export const countPreambleTokens = (request: CanonicalRequest): number => {
  let total = REQUEST_OVERHEAD_TOKENS
  if (request.system.length > 0) {
    total += MESSAGE_OVERHEAD_TOKENS
    for (const block of request.system) total += countTextTokens(block.text)
  }
  for (const tool of request.tools) {
    total += TOOL_OVERHEAD_TOKENS + countTextTokens(tool.name) + countTextTokens(tool.description ?? "") +
      countTextTokens(JSON.stringify(tool.inputSchema))
  }
  if (request.responseFormat.type === "json_schema") {
    total += countTextTokens(request.responseFormat.name) + countTextTokens(JSON.stringify(request.responseFormat.schema))
  }
  return total
}

export const countRequestInputTokens = (request: CanonicalRequest): number =>
  request.messages.reduce((sum, message) => sum + countMessageTokens(message), countPreambleTokens(request))
