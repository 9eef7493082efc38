/**
 * What a request's input counts in o200k_base tokens (the GPT-4o/GPT-5 encoding), two ways:
 * - `requestTokenBound`: an upper bound without the tokenizer (`token-bound.ts`), on the event
 *   loop in slices — what metering reserves and rate-limits (it only needs never to undercount);
 * - `countRequestTokens`: the exact count, in the tokenizer thread (`tokenizer.ts`) — what
 *   count_tokens answers, what the simulator reports, and the usage estimate of a call whose
 *   upstream reported none.
 *
 * Either is an estimate for budgeting, not a reproduction of any provider's chat template:
 * - text, thinking, tool-call arguments (as JSON) and tool results: their tokens;
 * - an image: IMAGE_TOKENS; a PDF or URL document: DOCUMENT_TOKENS; a text document: its tokens;
 * - every message: MESSAGE_OVERHEAD_TOKENS more; every tool: its name, description and input
 *   schema JSON plus TOOL_OVERHEAD_TOKENS; a JSON-schema response format: its schema JSON;
 * - every request: REQUEST_OVERHEAD_TOKENS (reply priming).
 */
import { Effect } from "effect"
import type { ContentBlock, Message } from "./content.ts"
import type { CanonicalRequest } from "./request.ts"
import { isLarge, jsonBytesInSlices, jsonTextPiecesInSlices } from "../util/sliced-stringify.ts"
import { pausesAt, runInSlices, type Sliced } from "../util/slices.ts"
import { textTokenBoundSteps } from "./token-bound.ts"
import { countTexts, type Text, TextPieces } from "./tokenizer.ts"

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

/**
 * JSON of a tool schema, tool-call input or response schema, made once per object: a request's
 * bound, exact count and the simulator all need it, and a megabyte schema should be serialized
 * (and become garbage) once, not five times.
 */
const jsonMemo = new WeakMap<object, Text>()
const jsonOf = (value: unknown): Text => {
  if (typeof value !== "object" || value === null) return JSON.stringify(value) ?? ""
  const known = jsonMemo.get(value)
  if (known !== undefined) return known
  const json = JSON.stringify(value)
  jsonMemo.set(value, json)
  return json
}

/**
 * What part of a prompt counts: tokens known without tokenizing, plus the tokens of `texts` (a
 * large value's JSON as the pieces it was made in, for the exact count: see `largeJsonTexts`).
 */
export interface PromptPart {
  readonly flat: number
  readonly texts: ReadonlyArray<Text>
}

/**
 * For the bound only: the UTF-8 size of each large JSON value of a request (a tool schema, a
 * response schema, a tool call's input over `LARGE_WIRE_UNITS` characters), counted in slices
 * (`largeJsonBytes`). Its bytes bound its tokens (a token is at least one byte), so its text is
 * never made at once: `JSON.stringify` of a 16 MiB schema held the event loop 130–170 ms on a slow
 * VM. (2.3× the exact count on JSON, against the text bound's 1.6×: only for such values.)
 */
type LargeJson = ReadonlyMap<object, number>

/** The JSON of `value` as a part's text, or its size in bytes when it is one of the large ones. */
const addJson = (value: unknown, part: { flat: number; texts: Array<Text> }, large: LargeJson | undefined) => {
  const bytes = typeof value === "object" && value !== null ? large?.get(value) : undefined
  if (bytes !== undefined) part.flat += bytes
  else part.texts.push(jsonOf(value))
}

const collectBlock = (block: ContentBlock, part: { flat: number; texts: Array<Text> }, large: LargeJson | undefined): void => {
  switch (block.type) {
    case "text":
      part.texts.push(block.text)
      return
    case "image":
      part.flat += IMAGE_TOKENS
      return
    case "document":
      if (block.source.kind === "text") part.texts.push(block.source.text)
      else part.flat += DOCUMENT_TOKENS
      return
    case "tool_use":
      part.texts.push(block.name)
      addJson(block.input, part, large)
      return
    case "tool_result":
      if (typeof block.content === "string") part.texts.push(block.content)
      else for (const inner of block.content) collectBlock(inner, part, large)
      return
    case "thinking":
      part.texts.push(block.thinking)
      return
    case "redacted_thinking":
      // Opaque encrypted reasoning; its length in characters is the best available proxy.
      part.flat += Math.ceil(block.data.length / 4)
      return
  }
}

/** A message: its blocks and MESSAGE_OVERHEAD_TOKENS. */
export const messagePart = (message: Message, large?: LargeJson): PromptPart => {
  const part = { flat: MESSAGE_OVERHEAD_TOKENS, texts: [] as Array<Text> }
  for (const block of message.content) collectBlock(block, part, large)
  return part
}

/** Everything before the first message: system text, tool definitions, the response schema. */
const preamblePart = (request: CanonicalRequest, large: LargeJson | undefined): PromptPart => {
  const part = { flat: REQUEST_OVERHEAD_TOKENS, texts: [] as Array<Text> }
  if (request.system.length > 0) {
    part.flat += MESSAGE_OVERHEAD_TOKENS
    for (const block of request.system) part.texts.push(block.text)
  }
  for (const tool of request.tools) {
    part.flat += TOOL_OVERHEAD_TOKENS
    part.texts.push(tool.name, tool.description ?? "")
    addJson(tool.inputSchema, part, large)
  }
  if (request.responseFormat.type === "json_schema") {
    part.texts.push(request.responseFormat.name)
    addJson(request.responseFormat.schema, part, large)
  }
  return part
}

/** The preamble, then each message, each part made when it is reached. */
function* eachPromptPart(request: CanonicalRequest, large?: LargeJson): Generator<PromptPart> {
  yield preamblePart(request, large)
  for (const message of request.messages) yield messagePart(message, large)
}

function* blockJsonValues(blocks: ReadonlyArray<ContentBlock>): Generator<unknown> {
  for (const block of blocks) {
    if (block.type === "tool_use") yield block.input
    else if (block.type === "tool_result" && typeof block.content !== "string") yield* blockJsonValues(block.content)
  }
}

/**
 * The large JSON values of `request` (over `LARGE_WIRE_UNITS` characters) among those whose text
 * `eachPromptPart` would make (schemas, tool-call inputs), found with a pause every few messages:
 * most requests have none, and a request of 16,000 messages is milliseconds of looking.
 */
function* largeJsonValues(request: CanonicalRequest, skip?: (value: object) => boolean): Sliced<Array<object>> {
  const large: Array<object> = []
  const consider = (value: unknown) => {
    if (typeof value === "object" && value !== null && skip?.(value) !== true && isLarge(value)) large.push(value)
  }
  for (const tool of request.tools) consider(tool.inputSchema)
  if (request.responseFormat.type === "json_schema") consider(request.responseFormat.schema)
  for (let i = 0; i < request.messages.length; i++) {
    for (const value of blockJsonValues(request.messages[i].content)) consider(value)
    if (pausesAt(i)) yield
  }
  return large
}

/** The UTF-8 size of each of `large` (see `LargeJson`), counted in slices. */
const jsonSizes = (large: ReadonlyArray<object>): Effect.Effect<LargeJson> => {
  const sizes = new Map<object, number>()
  return Effect.as(Effect.forEach(large, (value) => Effect.map(jsonBytesInSlices(value), (bytes) => void sizes.set(value, bytes)), { discard: true }), sizes)
}

/** The preamble, then each message, made with a pause every few messages. */
function* promptPartsOf(request: CanonicalRequest): Sliced<Array<PromptPart>> {
  const parts: Array<PromptPart> = []
  for (const part of eachPromptPart(request)) {
    parts.push(part)
    // The preamble is part 0: message i is part i + 1.
    if (parts.length > 1 && pausesAt(parts.length - 2)) yield
  }
  return parts
}

/** The preamble, then each message (in slices: a long request's parts are milliseconds of making). */
export const promptParts = (request: CanonicalRequest): Effect.Effect<Array<PromptPart>> => runInSlices(promptPartsOf(request))

/** Exact tokens of each part, in order (one job for the tokenizer thread). */
export const countPartTokens = (parts: ReadonlyArray<PromptPart>): Effect.Effect<Array<number>> =>
  Effect.map(countTexts(parts.flatMap((part) => part.texts)), (counts) => {
    let next = 0
    return parts.map((part) => {
      let total = part.flat
      for (let i = 0; i < part.texts.length; i++) total += counts[next++]
      return total
    })
  })

/** Exact input tokens of a request. */
export const countRequestTokens = (request: CanonicalRequest): Effect.Effect<number> =>
  Effect.andThen(largeJsonTexts(request), Effect.flatMap(promptParts(request), (parts) => Effect.map(countPartTokens(parts), (counts) => counts.reduce((sum, n) => sum + n, 0))))

/**
 * For the exact count, which needs their text: the JSON of a request's large values made in
 * slices into `jsonOf`'s memo first, as its pieces, so `promptParts` finds it there instead of
 * running `JSON.stringify` of a 16 MiB schema at once (130–170 ms on a slow VM), and the pieces go
 * to the tokenizer thread as they are (`TextPieces`), joined there.
 */
const largeJsonTexts = (request: CanonicalRequest): Effect.Effect<void> =>
  Effect.flatMap(runInSlices(largeJsonValues(request, (value) => jsonMemo.has(value))), (large) =>
    large.length === 0
      ? Effect.void
      : Effect.forEach(large, (value) => Effect.map(jsonTextPiecesInSlices(value), (pieces) => void jsonMemo.set(value, new TextPieces(pieces))), { discard: true }))

/** Characters bounded between two yields to the event loop (a fraction of a millisecond). */
const BOUND_SLICE_UNITS = 16_384
/**
 * What a text costs beyond its characters, in the same units: taking it up (and, for a request,
 * its message's part) is work too, so 20,000 two-character texts are not one slice of 40,000.
 */
const TEXT_UNITS = 64

/**
 * An upper bound on the exact tokens of `texts` (see token-bound.ts), computed on the event loop
 * in slices of BOUND_SLICE_UNITS characters with a yield between them, so a 32 MiB input never
 * holds the loop for more than about a millisecond at a time. The texts are taken up one by one,
 * so an iterable that makes them as it goes (`requestTexts`) is sliced too.
 */
export const textsTokenBound = Effect.fnUntraced(function*(texts: Iterable<string>) {
  let total = 0
  let sinceYield = 0
  for (const text of texts) {
    const steps = textTokenBoundSteps(text, BOUND_SLICE_UNITS)
    let more = steps.next()
    sinceYield += TEXT_UNITS + Math.min(text.length, BOUND_SLICE_UNITS)
    while (more) {
      if (sinceYield >= BOUND_SLICE_UNITS) {
        yield* Effect.yieldNow
        sinceYield = 0
      }
      more = steps.next()
      sinceYield += BOUND_SLICE_UNITS
    }
    total += steps.tokens
    if (sinceYield >= BOUND_SLICE_UNITS) {
      yield* Effect.yieldNow
      sinceYield = 0
    }
  }
  return total
})

/**
 * The texts of `promptParts(request)` in order, each part made when it is reached (not all of
 * them up front, in one turn of the event loop); their flat tokens are added to `flat` as it goes.
 */
function* requestTexts(request: CanonicalRequest, flat: { tokens: number }, large: LargeJson | undefined): Generator<string> {
  for (const part of eachPromptPart(request, large)) {
    flat.tokens += part.flat
    // A large value counts by its size here (`large`), so its pieces are not among the texts.
    for (const text of part.texts) yield typeof text === "string" ? text : text.pieces.join("")
  }
}

/** An upper bound on a request's input tokens (what metering reserves): never below `countRequestTokens`. */
export const requestTokenBound = (request: CanonicalRequest): Effect.Effect<number> => {
  const bound = (large: LargeJson | undefined) => {
    const flat = { tokens: 0 }
    return Effect.map(textsTokenBound(requestTexts(request, flat, large)), (texts) => texts + flat.tokens)
  }
  return Effect.flatMap(runInSlices(largeJsonValues(request)), (large) => large.length === 0 ? bound(undefined) : Effect.flatMap(jsonSizes(large), bound))
}
