/**
 * What the simulator answers, decided from the request alone (pure and deterministic).
 *
 * The rules, in order (first match wins):
 * 1. Forced tools: `toolChoice` `tool` calls that tool; `any` calls the tools the last user message
 *    mentions, or the first tool when it mentions none.
 * 2. Echo: if the last user message's text contains `say exactly:` (any case), the reply is the
 *    text after it, verbatim except for leading whitespace. Stop sequences and the output ceiling
 *    still apply. The most useful convention for deterministic tests.
 * 3. Tool results: if the last user message carries `tool_result` blocks, the reply starts with
 *    `The <tool name> tool returned: <first 200 characters of the result>.` (or `… tool reported
 *    an error: …` when `isError`) for each result, followed by prose.
 * 4. Auto tools: with `toolChoice` `auto`, the tools whose names appear in the last user message's
 *    text (case-insensitive, as whole words) are called, in order of first mention; only the first
 *    when `parallelToolCalls` is false.
 * 5. Prose: 20 to 120 tokens of the vocabulary in `words.ts`, length drawn from the seed.
 * With a JSON response format, rules 3 and 5 produce JSON instead: `{"answer": "<prose>"}` for
 * `json_object`, a value generated from the schema for `json_schema`.
 */
import { Effect } from "effect"
import type { Message, ToolResultBlock } from "../../model/content.ts"
import type { Json } from "../../util/json.ts"
import { joinText, toolResultText } from "../../model/content.ts"
import type { CanonicalRequest, ToolDefinition } from "../../model/request.ts"
import { sampleJsonSchema } from "./json-schema-sample.ts"
import type { Prng } from "./prng.ts"
import { composeProse } from "./words.ts"

interface ScriptedToolCall {
  readonly id: string
  readonly name: string
  readonly input: Json
}

export type Reply =
  | { readonly kind: "text"; readonly text: string }
  | { readonly kind: "tool_calls"; readonly calls: ReadonlyArray<ScriptedToolCall> }

const SAY_EXACTLY = "say exactly:"

const SAY_EXACTLY_ANY_CASE = /say exactly:/i

/** The text after `say exactly:` (any case) in a message, or undefined. Searches without copying the text. */
const sayExactly = (text: string): string | undefined => {
  const match = SAY_EXACTLY_ANY_CASE.exec(text)
  return match === null ? undefined : text.slice(match.index + SAY_EXACTLY.length).trimStart()
}

const escapeRegExp = (text: string): string => text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")

/** A message this long is searched tool by tool with a yield between (each search reads it all). */
const LONG_TEXT = 65_536

/** Tools named in `text` as whole words, ordered by first mention. */
const mentionedTools = Effect.fnUntraced(function*(text: string, tools: ReadonlyArray<ToolDefinition>): Effect.fn.Return<Array<ToolDefinition>> {
  const found: Array<{ tool: ToolDefinition; at: number }> = []
  for (const tool of tools) {
    const wholeWord = new RegExp(`(?<![A-Za-z0-9_])${escapeRegExp(tool.name)}(?![A-Za-z0-9_])`, "i")
    const at = text.search(wholeWord)
    if (at !== -1) found.push({ tool, at })
    if (text.length > LONG_TEXT) yield* Effect.yieldNow
  }
  return found.sort((a, b) => a.at - b.at).map(({ tool }) => tool)
})

const callTools = (tools: ReadonlyArray<ToolDefinition>, prng: Prng): Reply => ({
  kind: "tool_calls",
  calls: tools.map((tool) => ({ id: `toolu_sim${prng.hex(20)}`, name: tool.name, input: sampleJsonSchema(tool.inputSchema, prng) }))
})

const toolNameOf = (toolUseId: string, messages: ReadonlyArray<Message>): string => {
  for (const message of messages) {
    for (const block of message.content) if (block.type === "tool_use" && block.id === toolUseId) return block.name
  }
  return "requested"
}

const SNIPPET_LENGTH = 200
/** JavaScript's `\s`, by character code. */
const isSpace = (code: number) =>
  (code >= 0x09 && code <= 0x0d) || code === 0x20 || code === 0xa0 || code === 0x1680 || (code >= 0x2000 && code <= 0x200a) ||
  code === 0x2028 || code === 0x2029 || code === 0x202f || code === 0x205f || code === 0x3000 || code === 0xfeff

/**
 * The first SNIPPET_LENGTH characters of `text` with whitespace runs collapsed to one space and
 * trimmed; reads only as far as it needs, so a huge tool result costs nothing more.
 */
const snippetOf = (text: string): string => {
  let out = ""
  let pendingSpace = false
  for (let i = 0; i < text.length && out.length < SNIPPET_LENGTH; i++) {
    if (isSpace(text.charCodeAt(i))) {
      pendingSpace = out.length > 0
      continue
    }
    if (pendingSpace) out += " "
    pendingSpace = false
    out += text[i]
  }
  return out.slice(0, SNIPPET_LENGTH)
}

const describeResult = (result: ToolResultBlock, messages: ReadonlyArray<Message>): string => {
  const snippet = snippetOf(toolResultText(result)) || "(no text)"
  const name = toolNameOf(result.toolUseId, messages)
  return result.isError ? `The ${name} tool reported an error: ${snippet}.` : `The ${name} tool returned: ${snippet}.`
}

const proseTokens = (prng: Prng): number => prng.int(20, 120)

/** Free text in the requested format. `lead` (a tool result summary) goes first in text mode. */
const compose = Effect.fnUntraced(function*(request: CanonicalRequest, prng: Prng, lead: string): Effect.fn.Return<Reply> {
  const format = request.responseFormat
  if (format.type === "json_schema") return { kind: "text", text: JSON.stringify(sampleJsonSchema(format.schema, prng)) }
  const prose = yield* composeProse(prng, proseTokens(prng))
  const text = lead === "" ? prose : `${lead} ${prose}`
  return { kind: "text", text: format.type === "json_object" ? JSON.stringify({ answer: text }) : text }
})

/**
 * A trailing assistant message of plain text is a prefill: the answer must continue it (the
 * runtime resumes a broken stream this way). The reply is then the reply to the conversation
 * without it, minus the prefilled text when it is a prefix of that reply.
 */
export const splitPrefill = (request: CanonicalRequest): { readonly request: CanonicalRequest; readonly prefill: string | undefined } => {
  const last = request.messages.at(-1)
  if (last?.role !== "assistant" || !last.content.every((block) => block.type === "text")) return { request, prefill: undefined }
  return { request: { ...request, messages: request.messages.slice(0, -1) }, prefill: joinText(last.content) }
}

export const decideReply = Effect.fnUntraced(function*(request: CanonicalRequest, prng: Prng): Effect.fn.Return<Reply> {
  const { request: base, prefill } = splitPrefill(request)
  if (prefill === undefined) return yield* decideFreshReply(request, prng)
  const reply = yield* decideFreshReply(base, prng)
  if (reply.kind !== "text") return reply
  return { kind: "text", text: reply.text.startsWith(prefill) ? reply.text.slice(prefill.length) : reply.text }
})

const decideFreshReply = Effect.fnUntraced(function*(request: CanonicalRequest, prng: Prng): Effect.fn.Return<Reply> {
  const last = request.messages.at(-1)
  const fromUser = last?.role === "user"
  const userText = fromUser ? joinText(last.content) : ""
  const { tools, toolChoice } = request

  if (tools.length > 0 && toolChoice.type === "tool") {
    return callTools([tools.find((tool) => tool.name === toolChoice.name) ?? tools[0]], prng)
  }
  if (tools.length > 0 && toolChoice.type === "any") {
    const named = yield* mentionedTools(userText, tools)
    return callTools(named.length > 0 ? (request.parallelToolCalls === false ? named.slice(0, 1) : named) : [tools[0]], prng)
  }
  const echo = sayExactly(userText)
  if (echo !== undefined) return { kind: "text", text: echo } satisfies Reply

  const results = fromUser ? last.content.filter((block) => block.type === "tool_result") : []
  if (results.length > 0) return yield* compose(request, prng, results.map((r) => describeResult(r, request.messages)).join(" "))

  if (tools.length > 0 && toolChoice.type === "auto") {
    const named = yield* mentionedTools(userText, tools)
    if (named.length > 0) return callTools(request.parallelToolCalls === false ? named.slice(0, 1) : named, prng)
  }
  return yield* compose(request, prng, "")
})
