/**
 * Answers of a broken or hostile upstream, for the fuzz suite's other side (the client's side is
 * `hostile-requests.ts`): fast-check arbitraries for what an OpenAI-compatible upstream
 * (`/v1/chat/completions`) and an Anthropic one (`/v1/messages`) may send back — streamed or whole,
 * mostly in the right order with some fields wrong, some events missing, out of order or foreign,
 * strings a database or an encoder may choke on (NUL, lone surrogates), numbers out of range,
 * indexes that are not indexes, JSON nested past any limit, error events, statuses, cut
 * connections — and a server that plays the answer the current case chose.
 */
import fc from "fast-check"
import { createServer, type Server } from "node:http"
import type { AddressInfo } from "node:net"

/** What the upstream sends for every call of one case (a retry gets the same answer). */
export interface UpstreamScript {
  readonly status: number
  readonly contentType: string
  /** Headers beside the content type (an error's `retry-after`). */
  readonly headers: Readonly<Record<string, string>>
  /** Written one after another, each its own write. */
  readonly parts: ReadonlyArray<string>
  /** Destroy the connection after the parts instead of ending the response. */
  readonly cut: boolean
  /** A short label for a failure's report. */
  readonly label: string
}

// ---------------------------------------------------------------------------------------------
// Values

const text = fc.oneof(
  { weight: 6, arbitrary: fc.string({ maxLength: 12 }) },
  { weight: 2, arbitrary: fc.constantFrom("a\u0000b", "\ud800", "x\udc00y", "🙂", "\n\ndata: [DONE]\n\n", "event: error\n", "", " ", "\u2028") },
  { weight: 1, arbitrary: fc.string({ unit: "grapheme", maxLength: 8 }) },
  { weight: 1, arbitrary: fc.constantFrom("x".repeat(70_000), "🙂".repeat(20_000)) }
)
const count = fc.oneof(
  { weight: 5, arbitrary: fc.nat(200) },
  { weight: 1, arbitrary: fc.constantFrom<unknown>(-5, 0.5, 1e300, 2 ** 53 + 2, -(2 ** 63), "7", null, true, {}, []) }
)
const index = fc.oneof(
  { weight: 6, arbitrary: fc.nat(3) },
  { weight: 1, arbitrary: fc.constantFrom<unknown>(-1, 1e9, 2 ** 53, 0.5, "0", null, undefined) }
)
/** Nested `depth` arrays: past `MAX_JSON_DEPTH` (128), and past what `JSON.stringify` can write. */
const deepText = (depth: number) => `${"[".repeat(depth)}${"]".repeat(depth)}`
/**
 * Such a value stands as a marker until the answer is written (`toJson`): neither this file's
 * `JSON.stringify` nor fast-check's printing of a case could take it whole.
 */
const deepMarker = (depth: number) => `\u0001DEEP:${depth}\u0001`
const toJson = (value: unknown) => JSON.stringify(value).replace(/"\\u0001DEEP:(\d+)\\u0001"/g, (_, depth: string) => deepText(Number(depth)))
const jsonish: fc.Arbitrary<unknown> = fc.oneof(
  { weight: 4, arbitrary: fc.jsonValue({ maxDepth: 3 }) },
  { weight: 1, arbitrary: fc.constantFrom(200, 5_000).map(deepMarker) }
)
/** A tool call's arguments as text: JSON, pieces of it, nesting past the limit, not JSON. */
const argumentsText = fc.oneof(
  { weight: 4, arbitrary: fc.jsonValue({ maxDepth: 3 }).map((v) => JSON.stringify(v)) },
  { weight: 2, arbitrary: fc.constantFrom('{"city":', '"Paris"}', "{", "}", "", "null", "[1,2", '{"a":"\\ud800"}') },
  { weight: 1, arbitrary: fc.constantFrom(129, 5_000).map((depth) => `{"a":${deepText(depth)}}`) },
  { weight: 1, arbitrary: fc.string({ maxLength: 10 }) }
)
const maybe = <A>(arbitrary: fc.Arbitrary<A>) => fc.option(arbitrary, { nil: undefined })

// ---------------------------------------------------------------------------------------------
// OpenAI Chat Completions

const openAiUsage = fc.oneof(
  { weight: 3, arbitrary: fc.record({ prompt_tokens: count, completion_tokens: count, total_tokens: count }) },
  { weight: 1, arbitrary: fc.record({ prompt_tokens: count, completion_tokens: count, prompt_tokens_details: fc.record({ cached_tokens: count }), completion_tokens_details: fc.record({ reasoning_tokens: count }) }, { requiredKeys: [] }) },
  { weight: 1, arbitrary: fc.constantFrom<unknown>(null, "usage", [], 5) }
)
const finishReason = fc.constantFrom<unknown>(null, "stop", "length", "tool_calls", "content_filter", "function_call", "weird", 5)
const toolFragment = fc.record({
  index,
  id: maybe(fc.oneof(fc.constantFrom("call_1", "call_2"), text)),
  type: maybe(fc.constantFrom<unknown>("function", "custom", 3)),
  function: fc.oneof(
    { weight: 5, arbitrary: fc.record({ name: maybe(fc.oneof(fc.constant("get_weather"), text)), arguments: maybe(argumentsText) }, { requiredKeys: [] }) },
    { weight: 1, arbitrary: jsonish }
  )
}, { requiredKeys: [] })
const openAiDelta = fc.oneof(
  { weight: 4, arbitrary: fc.record({ content: text }) },
  { weight: 3, arbitrary: fc.record({ tool_calls: fc.oneof({ weight: 5, arbitrary: fc.array(toolFragment, { maxLength: 3 }) }, { weight: 1, arbitrary: jsonish }) }) },
  { weight: 1, arbitrary: fc.record({ role: fc.constantFrom<unknown>("assistant", "user", 5), content: fc.oneof(text, fc.constant(null)) }) },
  { weight: 1, arbitrary: fc.record({ refusal: fc.oneof(text, fc.constant(null)) }) },
  { weight: 1, arbitrary: fc.record({ reasoning_content: text }) },
  { weight: 1, arbitrary: jsonish }
)
const openAiChoice = fc.record({ index, delta: openAiDelta, finish_reason: finishReason, logprobs: maybe(jsonish) }, { requiredKeys: ["delta"] })
const openAiChunk: fc.Arbitrary<unknown> = fc.oneof(
  { weight: 8, arbitrary: fc.record({ id: fc.constant("chatcmpl-1"), object: fc.constant("chat.completion.chunk"), created: count, model: fc.constantFrom<unknown>("m", 5, null), choices: fc.array(openAiChoice, { minLength: 1, maxLength: 2 }), usage: fc.constant(null) }, { requiredKeys: ["choices"] }) },
  { weight: 1, arbitrary: fc.record({ choices: fc.oneof(fc.constant([]), jsonish), usage: openAiUsage }, { requiredKeys: [] }) },
  { weight: 1, arbitrary: fc.record({ error: fc.oneof(fc.record({ message: text, type: fc.oneof(text, fc.constant("server_error")), code: maybe(jsonish) }, { requiredKeys: [] }), jsonish) }) },
  { weight: 1, arbitrary: jsonish }
)
const dataLine = (value: unknown) => `data: ${toJson(value)}\n\n`
const openAiStreamParts = fc.record({
  head: fc.boolean(),
  chunks: fc.array(fc.oneof({ weight: 9, arbitrary: openAiChunk.map(dataLine) }, { weight: 1, arbitrary: fc.constantFrom("data: {not json\n\n", ": comment\n\n", "event: error\ndata: {}\n\n", "data:\n\n", "retry: 5\n\n") }), { maxLength: 8 }),
  finish: maybe(finishReason),
  usage: maybe(openAiUsage),
  done: fc.boolean()
}).map(({ head, chunks, finish, usage, done }) => [
  ...(head ? [dataLine({ id: "chatcmpl-1", object: "chat.completion.chunk", created: 0, model: "m", choices: [{ index: 0, delta: { role: "assistant", content: "" }, finish_reason: null }], usage: null })] : []),
  ...chunks,
  ...(finish === undefined ? [] : [dataLine({ id: "chatcmpl-1", object: "chat.completion.chunk", created: 0, model: "m", choices: [{ index: 0, delta: {}, finish_reason: finish }], usage: null })]),
  ...(usage === undefined ? [] : [dataLine({ id: "chatcmpl-1", object: "chat.completion.chunk", created: 0, model: "m", choices: [], usage })]),
  ...(done ? ["data: [DONE]\n\n"] : [])
])
const openAiMessage = fc.record({
  role: fc.constantFrom<unknown>("assistant", 5),
  content: fc.oneof(text, fc.constant(null), jsonish),
  tool_calls: maybe(fc.oneof({ weight: 4, arbitrary: fc.array(fc.record({ id: text, type: fc.constant("function"), function: fc.record({ name: fc.oneof(fc.constant("get_weather"), text), arguments: argumentsText }) }), { maxLength: 3 }) }, { weight: 1, arbitrary: jsonish })),
  refusal: maybe(fc.oneof(text, fc.constant(null)))
}, { requiredKeys: [] })
const openAiWhole = fc.oneof(
  { weight: 6, arbitrary: fc.record({ id: fc.constant("chatcmpl-1"), object: fc.constant("chat.completion"), created: count, model: fc.constant("m"), choices: fc.oneof({ weight: 5, arbitrary: fc.array(fc.record({ index, message: openAiMessage, finish_reason: finishReason }, { requiredKeys: [] }), { maxLength: 2 }) }, { weight: 1, arbitrary: jsonish }), usage: openAiUsage }, { requiredKeys: [] }) },
  { weight: 1, arbitrary: jsonish }
).map((body) => [toJson(body)])

// ---------------------------------------------------------------------------------------------
// Anthropic Messages

const anthropicUsage = fc.oneof(
  { weight: 4, arbitrary: fc.record({ input_tokens: count, output_tokens: count, cache_read_input_tokens: maybe(count), cache_creation_input_tokens: maybe(count) }, { requiredKeys: [] }) },
  { weight: 1, arbitrary: fc.constantFrom<unknown>(null, "usage", [], 5) }
)
const stopReason = fc.constantFrom<unknown>(null, "end_turn", "max_tokens", "tool_use", "stop_sequence", "pause_turn", "refusal", "weird", 7)
const contentBlock = fc.oneof(
  { weight: 4, arbitrary: fc.record({ type: fc.constant("text"), text }) },
  { weight: 3, arbitrary: fc.record({ type: fc.constant("tool_use"), id: fc.oneof(fc.constant("toolu_1"), text), name: fc.oneof(fc.constant("get_weather"), text), input: fc.oneof(fc.constant({}), jsonish) }, { requiredKeys: ["type"] }) },
  { weight: 2, arbitrary: fc.record({ type: fc.constant("thinking"), thinking: text, signature: text }, { requiredKeys: ["type"] }) },
  { weight: 1, arbitrary: fc.record({ type: fc.constant("redacted_thinking"), data: fc.oneof(text, jsonish) }) },
  { weight: 1, arbitrary: fc.record({ type: fc.constantFrom<unknown>("server_tool_use", "web_search_tool_result", "image", "weird", 5), id: text, input: jsonish, content: jsonish }, { requiredKeys: ["type"] }) },
  { weight: 1, arbitrary: jsonish }
)
const blockDelta = fc.oneof(
  { weight: 4, arbitrary: fc.record({ type: fc.constant("text_delta"), text }) },
  { weight: 3, arbitrary: fc.record({ type: fc.constant("input_json_delta"), partial_json: argumentsText }) },
  { weight: 2, arbitrary: fc.record({ type: fc.constantFrom("thinking_delta", "signature_delta"), thinking: text, signature: text }, { requiredKeys: ["type"] }) },
  { weight: 1, arbitrary: fc.record({ type: fc.constantFrom<unknown>("citations_delta", "weird", 3), citation: jsonish }) },
  { weight: 1, arbitrary: jsonish }
)
const event = (name: string, data: unknown) => `event: ${name}\ndata: ${toJson(data)}\n\n`
const anthropicBlockEvents = fc.record({ index, block: contentBlock, deltas: fc.array(blockDelta, { maxLength: 3 }), stop: fc.boolean(), deltaIndex: maybe(index) }).map(({ index, block, deltas, stop, deltaIndex }) => [
  event("content_block_start", { type: "content_block_start", index, content_block: block }),
  ...deltas.map((delta) => event("content_block_delta", { type: "content_block_delta", index: deltaIndex ?? index, delta })),
  ...(stop ? [event("content_block_stop", { type: "content_block_stop", index })] : [])
])
const anthropicStrayEvent = fc.oneof(
  fc.record({ type: fc.constant("error"), error: fc.oneof(fc.record({ type: fc.constantFrom<unknown>("overloaded_error", "api_error", "invalid_request_error", "weird", 4), message: text }, { requiredKeys: [] }), jsonish) }).map((data) => event("error", data)),
  fc.constantFrom(event("ping", { type: "ping" }), "event: weird\ndata: {}\n\n", "data: {not json\n\n", event("message_stop", { type: "message_stop" }), event("content_block_stop", { type: "content_block_stop", index: 0 })),
  fc.tuple(fc.constantFrom("message_start", "message_delta", "content_block_delta", "content_block_start"), jsonish).map(([name, data]) => event(name, data))
)
const anthropicStreamParts = fc.record({
  start: fc.oneof({ weight: 6, arbitrary: fc.constant<unknown>(undefined) }, { weight: 1, arbitrary: fc.constant<unknown>(null) }, { weight: 1, arbitrary: jsonish }),
  startUsage: anthropicUsage,
  blocks: fc.array(anthropicBlockEvents, { maxLength: 4 }),
  strays: fc.array(fc.tuple(fc.nat(20), anthropicStrayEvent), { maxLength: 2 }),
  delta: maybe(fc.record({ stop: stopReason, usage: anthropicUsage })),
  stop: fc.boolean()
}).map(({ start, startUsage, blocks, strays, delta, stop }) => {
  const parts = [
    event("message_start", {
      type: "message_start",
      message: start === undefined
        ? { id: "msg_1", type: "message", role: "assistant", model: "m", content: [], stop_reason: null, stop_sequence: null, usage: startUsage }
        : start
    }),
    ...blocks.flat(),
    ...(delta === undefined ? [] : [event("message_delta", { type: "message_delta", delta: { stop_reason: delta.stop, stop_sequence: null }, usage: delta.usage })]),
    ...(stop ? [event("message_stop", { type: "message_stop" })] : [])
  ]
  for (const [at, stray] of strays) parts.splice(at % (parts.length + 1), 0, stray)
  return parts
})
const anthropicWhole = fc.oneof(
  { weight: 6, arbitrary: fc.record({ id: fc.constant("msg_1"), type: fc.constant("message"), role: fc.constant("assistant"), model: fc.constant("m"), content: fc.oneof({ weight: 5, arbitrary: fc.array(contentBlock, { maxLength: 4 }) }, { weight: 1, arbitrary: jsonish }), stop_reason: stopReason, stop_sequence: fc.constant(null), usage: anthropicUsage }, { requiredKeys: [] }) },
  { weight: 1, arbitrary: jsonish }
).map((body) => [toJson(body)])

// ---------------------------------------------------------------------------------------------
// Whole answers

const errorParts = fc.oneof(
  fc.record({ error: fc.record({ message: text, type: text }, { requiredKeys: [] }) }).map((b) => [JSON.stringify(b)]),
  fc.record({ type: fc.constant("error"), error: fc.record({ type: text, message: text }, { requiredKeys: [] }) }).map((b) => [JSON.stringify(b)]),
  fc.constantFrom(["<html>bad gateway</html>"], [""], ['{"error":'])
)

/** An upstream answer for `dialect`, to a call that asked to stream or not. */
export const upstreamScript = (dialect: "openai" | "anthropic", stream: boolean): fc.Arbitrary<UpstreamScript> =>
  fc.oneof(
    { weight: 8, arbitrary: fc.record({
      parts: dialect === "openai" ? (stream ? openAiStreamParts : openAiWhole) : (stream ? anthropicStreamParts : anthropicWhole),
      // A stream sometimes answered as JSON, a whole answer sometimes as a stream, or as neither.
      contentType: fc.oneof({ weight: 8, arbitrary: fc.constant(stream ? "text/event-stream" : "application/json") }, { weight: 1, arbitrary: fc.constantFrom("text/event-stream", "application/json", "text/plain", "", "application/json; charset=utf-16", "text/event-stream; charset=latin1") }),
      cut: fc.oneof({ weight: 9, arbitrary: fc.constant(false) }, { weight: 1, arbitrary: fc.constant(true) }),
      split: fc.nat(40),
      // An encoding the body does not have (the gateway asks for none).
      encoding: fc.oneof({ weight: 12, arbitrary: fc.constant(undefined) }, { weight: 1, arbitrary: fc.constantFrom("gzip", "br", "deflate", "identity", "zstd") })
    }).map(({ parts, contentType, cut, split, encoding }) => ({
      status: 200,
      contentType,
      headers: encoding === undefined ? {} : { "content-encoding": encoding },
      // A part cut in two at `split`: the gateway must join what arrives in pieces.
      parts: splitOne(parts, split),
      cut,
      label: `${dialect} ${stream ? "stream" : "whole"} 200${cut ? " cut" : ""}`
    })) },
    { weight: 1, arbitrary: fc.record({ status: fc.constantFrom(400, 401, 404, 413, 429, 500, 502, 503, 529, 302, 204), parts: errorParts, headers: retryHeaders }).map(({ status, parts, headers }) => ({
      status,
      contentType: "application/json",
      headers,
      parts,
      cut: false,
      label: `${dialect} ${stream ? "stream" : "whole"} ${status}`
    })) }
  )

/**
 * An error's wait as an upstream may state it: none, nothing usable, or past what the gateway
 * waits out (a minute). Never a usable wait under a minute: the case would take that long.
 */
const retryHeaders = fc.record({
  "retry-after": fc.constantFrom("0", "-5", "abc", "1e300", "86400", "Wed, 21 Oct 2099 07:28:00 GMT", "Thu, 01 Jan 1970 00:00:00 GMT", ""),
  "retry-after-ms": fc.constantFrom("0", "-1", "1e20", "x", "")
}, { requiredKeys: [] })

const splitOne = (parts: ReadonlyArray<string>, at: number): ReadonlyArray<string> => {
  if (parts.length === 0) return parts
  const i = at % parts.length
  const part = parts[i]!
  const cut = Math.floor(part.length / 2)
  return [...parts.slice(0, i), part.slice(0, cut), part.slice(cut), ...parts.slice(i + 1)]
}

/** A server playing `current` to every POST, on both dialects' paths. */
export const startScriptedUpstream = async () => {
  const state: { current: UpstreamScript | undefined; calls: number } = { current: undefined, calls: 0 }
  const server: Server = createServer((req, res) => {
    req.resume()
    req.on("end", () => {
      state.calls++
      const script = state.current
      if (script === undefined) {
        res.writeHead(500).end()
        return
      }
      const headers: Record<string, string> = { ...script.headers, ...(script.contentType === "" ? {} : { "content-type": script.contentType }) }
      if (script.status === 302) headers.location = "http://127.0.0.1:1/elsewhere"
      res.writeHead(script.status, headers)
      for (const part of script.parts) res.write(part)
      if (script.cut) res.destroy()
      else res.end()
    })
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    state,
    close: () => new Promise<void>((resolve) => {
      server.closeAllConnections()
      server.close(() => resolve())
    })
  }
}
