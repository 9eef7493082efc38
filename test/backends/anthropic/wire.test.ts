/**
 * The pure halves of the Anthropic backend: the SSE parser, the upstream event translator, the
 * canonical → Messages request translation and the upstream error mapping.
 */
import { describe, expect, it } from "vitest"
import { messagesUrl } from "../../../src/backends/anthropic/index.ts"
import { type SseEvent, sseEvents } from "../../../src/backends/upstream/sse.ts"
import { errorFromResponse, MAX_ANSWER_BLOCKS, MAX_EVENT_VALUES, MAX_TOOL_INPUT_CHARS, retryAfterSeconds } from "../../../src/backends/upstream/upstream.ts"
import { messageAsEvents, translateMessagesSse } from "../../../src/backends/anthropic/wire-events.ts"
import { toWireRequest } from "../../../src/backends/anthropic/wire-request.ts"
import { eventOrderViolation } from "../../../src/model/event-order.ts"
import { collect } from "../../../src/model/events.ts"
import { makeRequest } from "../../../src/model/request.ts"
import { MAX_REPORTED_TOKENS } from "../../../src/model/usage.ts"
import { sse } from "./upstreams.ts"

describe("SSE events (the Messages reader)", () => {
  const text = ": comment\r\nevent: a\r\ndata: {\"x\":1}\r\n\r\nevent: b\ndata: line1\ndata:line2\n\ndata: unnamed\r\r"
  const expected = [{ event: "a", data: "{\"x\":1}" }, { event: "b", data: "line1\nline2" }, { event: undefined, data: "unnamed" }]

  it("parses LF, CRLF and CR line ends, comments and multi-line data", () => {
    const parser = sseEvents()
    expect([...parser.feed(text), ...parser.end()]).toEqual(expected)
  })

  it("reads fields as the spec does: no colon, no space, one space dropped, other fields and empty events skipped", () => {
    const fields = "event\ndata\n\nevent:x\ndata:  two\nid: 7\nretry: 10\ndata: 3\ndata\n\n\n\nid: only\n\ndata: a\ndata: b\ndata: c\r\n\r\n:done\n"
    const want = [{ event: "", data: "" }, { event: "x", data: " two\n3\n" }, { event: undefined, data: "a\nb\nc" }]
    for (let size = 1; size <= fields.length; size += size < 8 ? 1 : 37) {
      const parser = sseEvents()
      const events: Array<SseEvent> = []
      for (let i = 0; i < fields.length; i += size) parser.feed(fields.slice(i, i + size), events)
      parser.end(events)
      expect(events, `chunks of ${size}`).toEqual(want)
    }
  })

  it("gives the same events however the text is cut into chunks", () => {
    for (let size = 1; size <= 7; size++) {
      const parser = sseEvents()
      const events = []
      for (let i = 0; i < text.length; i += size) events.push(...parser.feed(text.slice(i, i + size)))
      events.push(...parser.end())
      expect(events).toEqual(expected)
    }
  })
})

const start = (usage: Record<string, number> = { input_tokens: 5, output_tokens: 1 }) => ({
  type: "message_start",
  message: { id: "msg_up", type: "message", role: "assistant", model: "upstream-x", content: [], usage }
})
const stop = (reason: string, usage: Record<string, unknown> = { output_tokens: 9 }) => [
  { type: "message_delta", delta: { stop_reason: reason, stop_sequence: null }, usage },
  { type: "message_stop" }
]

describe("upstream event translation", () => {
  it("skips server tool blocks, renumbers the rest and closes a block left open", () => {
    const { events, error } = translateMessagesSse(sse(
      start(),
      { type: "content_block_start", index: 0, content_block: { type: "server_tool_use", id: "srvtoolu_1", name: "web_search", input: {} } },
      { type: "content_block_delta", index: 0, delta: { type: "input_json_delta", partial_json: "{\"q\":1}" } },
      { type: "content_block_stop", index: 0 },
      { type: "content_block_start", index: 1, content_block: { type: "text", text: "" } },
      { type: "content_block_delta", index: 1, delta: { type: "text_delta", text: "found" } },
      { type: "content_block_delta", index: 1, delta: { type: "citations_delta", citation: {} } },
      { type: "content_block_start", index: 2, content_block: { type: "tool_use", id: "toolu_1", name: "f", input: {} } },
      { type: "content_block_delta", index: 2, delta: { type: "input_json_delta", partial_json: "{\"a\":2}" } },
      ...stop("pause_turn")
    ), "svc-x")
    expect(error).toBeUndefined()
    expect(eventOrderViolation(events)).toBeUndefined()
    expect(collect(events)).toMatchObject({
      model: "svc-x",
      content: [{ type: "text", text: "found" }, { type: "tool_use", id: "toolu_1", name: "f", input: { a: 2 } }],
      stopReason: "end_turn"
    })
  })

  it("folds usage: cache reads and writes are input, thinking tokens from the details or the text", () => {
    const cached = translateMessagesSse(sse(start({ input_tokens: 3, cache_read_input_tokens: 40, cache_creation_input_tokens: 7 }), ...stop("max_tokens", { output_tokens: 12, output_tokens_details: { thinking_tokens: 10 } })), "m")
    expect(cached.events.at(-1)).toEqual({
      type: "message_stop",
      stopReason: "max_tokens",
      usage: { inputTokens: 50, cachedInputTokens: 40, outputTokens: 12, reasoningTokens: 10 }
    })
    const counted = translateMessagesSse(sse(
      start(),
      { type: "content_block_start", index: 0, content_block: { type: "thinking", thinking: "", signature: "" } },
      { type: "content_block_delta", index: 0, delta: { type: "thinking_delta", thinking: "two words" } },
      { type: "content_block_delta", index: 0, delta: { type: "signature_delta", signature: "sig" } },
      { type: "content_block_stop", index: 0 },
      ...stop("end_turn")
    ), "m")
    // Not reported upstream: left for the backend to count in the tokenizer thread.
    expect(collect(counted.events).usage.reasoningTokens).toBe(0)
    expect(counted.unreportedThinking).toBe("two words")
    expect(collect(counted.events).content).toEqual([{ type: "thinking", thinking: "two words", signature: "sig" }])
  })

  it("takes what the protocol says is text only as text, and a count only as a whole number in range", () => {
    // The deep value is spliced into the event's text: this file cannot stringify it either.
    const deep = `${"[".repeat(5_000)}${"]".repeat(5_000)}`
    const { events, error } = translateMessagesSse(sse(
      start({ input_tokens: -3, cache_read_input_tokens: 2.5 } as Record<string, number>),
      // A redacted block's data nested past what JSON.stringify can write (a 500 on the Messages surface).
      { type: "content_block_start", index: 0, content_block: { type: "redacted_thinking", data: "DEEP" } },
      { type: "content_block_stop", index: 0 },
      { type: "content_block_start", index: 1, content_block: { type: "text", text: { not: "text" } } },
      { type: "content_block_delta", index: 1, delta: null },
      { type: "content_block_delta", index: 1, delta: { type: "text_delta", text: ["x"] } },
      { type: "content_block_delta", index: 1, delta: { type: "text_delta", text: "kept" } },
      { type: "content_block_stop", index: 1 },
      { type: "content_block_start", index: 2, content_block: { type: "tool_use", id: { a: 1 }, name: 7, input: {} } },
      { type: "content_block_delta", index: 2, delta: { type: "input_json_delta", partial_json: { a: 1 } } },
      { type: "content_block_stop", index: 2 },
      // An object where a count belongs was NaN, and a NaN count failed the settlement (a 500).
      { type: "message_delta", delta: { stop_reason: "constructor", stop_sequence: { s: 1 } }, usage: { output_tokens: {} } },
      { type: "message_stop" }
    ).replace('"DEEP"', deep), "m")
    expect(error).toBeUndefined()
    expect(eventOrderViolation(events)).toBeUndefined()
    const answer = collect(events)
    expect(answer.content).toEqual([
      { type: "redacted_thinking", data: "" },
      { type: "text", text: "kept" },
      { type: "tool_use", id: "", name: "", input: {} }
    ])
    expect(answer.stopReason).toBe("end_turn")
    expect(answer.stopSequence).toBeUndefined()
    expect(answer.usage).toEqual({ inputTokens: 2, cachedInputTokens: 2, outputTokens: 0, reasoningTokens: 0 })
    const huge = translateMessagesSse(sse(start({ input_tokens: 1e300, cache_read_input_tokens: 1e300 }), ...stop("end_turn", { output_tokens: 1e300 })), "m")
    expect(huge.events.at(-1)).toMatchObject({ usage: { inputTokens: MAX_REPORTED_TOKENS, cachedInputTokens: MAX_REPORTED_TOKENS, outputTokens: MAX_REPORTED_TOKENS } })
    const error2 = translateMessagesSse(sse(start(), { type: "error", error: { type: "constructor", message: { deep: true } } }), "m").error
    expect(error2).toMatchObject({ status: 500, message: "The upstream stream failed" })
  })

  it("fails on protocol breaks and error events", () => {
    const cases: Array<[string, { status: number; retryable: boolean }]> = [
      [sse({ type: "content_block_start", index: 0, content_block: { type: "text", text: "" } }), { status: 502, retryable: true }],
      [sse(start(), start()), { status: 502, retryable: true }],
      ["event: message_start\ndata: {not json\n\n", { status: 502, retryable: true }],
      [sse(start()), { status: 502, retryable: true }],
      [sse(start(), { type: "error", error: { type: "overloaded_error", message: "busy" } }), { status: 529, retryable: true }],
      [sse(start(), { type: "error", error: { type: "invalid_request_error", message: "no" } }), { status: 400, retryable: false }]
    ]
    for (const [text, expected] of cases) expect(translateMessagesSse(text, "m").error).toMatchObject(expected)
    expect(translateMessagesSse("event: ping\ndata:\n\n" + sse(start(), ...stop("end_turn")), "m").error).toBeUndefined()
  })

  it("takes at most MAX_ANSWER_BLOCKS blocks and MAX_TOOL_INPUT_CHARS of a tool's input, streamed or whole", () => {
    const text = (index: number) => [
      { type: "content_block_start", index, content_block: { type: "text", text: "" } },
      { type: "content_block_stop", index }
    ]
    const blocks = (n: number) => Array.from({ length: n }, (_, i) => text(i)).flat()
    expect(translateMessagesSse(sse(start(), ...blocks(MAX_ANSWER_BLOCKS), ...stop("end_turn")), "m").error).toBeUndefined()
    expect(translateMessagesSse(sse(start(), ...blocks(MAX_ANSWER_BLOCKS + 1), ...stop("end_turn")), "m").error)
      .toMatchObject({ status: 502, message: `The upstream's answer has more than ${MAX_ANSWER_BLOCKS} content blocks` })
    // Server tool blocks count too (they are skipped, not free).
    const server = Array.from({ length: MAX_ANSWER_BLOCKS }, (_, i) => [
      { type: "content_block_start", index: i, content_block: { type: "server_tool_use", id: `s${i}`, name: "web_search", input: {} } },
      { type: "content_block_stop", index: i }
    ]).flat()
    expect(translateMessagesSse(sse(start(), ...server, ...text(MAX_ANSWER_BLOCKS), ...stop("end_turn")), "m").error).toMatchObject({ status: 502 })
    // A whole answer of a million blocks: refused, and its blocks are not all expanded first.
    const whole = { type: "message", content: new Array(1_000_000).fill({ type: "text", text: "a" }), stop_reason: "end_turn", usage: { input_tokens: 1, output_tokens: 1 } }
    expect(messageAsEvents(whole).length).toBeLessThan(2 * MAX_ANSWER_BLOCKS + 8)
    // A tool's input: in pieces up to the limit, then past it; and whole, as an object.
    const tool = { type: "content_block_start", index: 0, content_block: { type: "tool_use", id: "t", name: "f", input: {} } }
    const piece = (json: string) => ({ type: "content_block_delta", index: 0, delta: { type: "input_json_delta", partial_json: json } })
    const long = `{"v":"${"x".repeat(MAX_TOOL_INPUT_CHARS - 8)}"}`
    expect(long.length).toBe(MAX_TOOL_INPUT_CHARS)
    const taken = translateMessagesSse(sse(start(), tool, piece(long.slice(0, 1000)), piece(long.slice(1000)), { type: "content_block_stop", index: 0 }, ...stop("tool_use")), "m")
    expect(taken.error).toBeUndefined()
    expect(collect(taken.events).content[0]).toMatchObject({ type: "tool_use", input: { v: "x".repeat(MAX_TOOL_INPUT_CHARS - 8) } })
    expect(translateMessagesSse(sse(start(), tool, piece(long), piece("x"), ...stop("tool_use")), "m").error)
      .toMatchObject({ status: 502, message: `The upstream sent a tool call whose input is longer than ${MAX_TOOL_INPUT_CHARS} characters` })
    // A streamed event of more values than any holds: refused before it is parsed.
    const heavy = { type: "content_block_start", index: 0, content_block: { type: "web_search_tool_result", content: new Array(140_000).fill(["aaaa", 1]) } }
    expect(translateMessagesSse(sse(start(), heavy, ...stop("end_turn")), "m").error)
      .toMatchObject({ status: 502, message: `The upstream sent a stream event of more than ${MAX_EVENT_VALUES} JSON values` })
    const bigInput = { type: "content_block_start", index: 0, content_block: { type: "tool_use", id: "t", name: "f", input: { v: "x".repeat(MAX_TOOL_INPUT_CHARS) } } }
    expect(translateMessagesSse(sse(start(), bigInput, { type: "content_block_stop", index: 0 }, ...stop("tool_use")), "m").error).toMatchObject({ status: 502 })
  })
})

const target = { upstreamModel: "u", reasoning: true }
const base = makeRequest({ model: "svc-atlas-1", messages: [{ role: "user", content: [{ type: "text", text: "hi" }] }] })

describe("canonical → Messages request", () => {
  it("sends thinking only for visible reasoning, within the ceiling, and not with a forced tool", () => {
    expect(toWireRequest({ ...base, reasoning: { enabled: true, visible: false } }, target)).not.toHaveProperty("thinking")
    expect(toWireRequest({ ...base, reasoning: { enabled: true, visible: true, effort: "low" } }, target).thinking).toEqual({ type: "enabled", budget_tokens: 2048 })
    expect(toWireRequest({ ...base, maxOutputTokens: 1500, reasoning: { enabled: true, visible: true, budgetTokens: 4000 } }, target).thinking).toEqual({ type: "enabled", budget_tokens: 1499 })
    expect(toWireRequest({ ...base, maxOutputTokens: 800, reasoning: { enabled: true, visible: true } }, target)).not.toHaveProperty("thinking")
    const forced = { ...base, tools: [{ name: "t", inputSchema: {} }], toolChoice: { type: "any" as const }, reasoning: { enabled: true, visible: true } }
    expect(toWireRequest(forced, target)).not.toHaveProperty("thinking")
  })

  it("never sends thinking to a model that does not reason", () => {
    expect(toWireRequest({ ...base, reasoning: { enabled: true, visible: true } }, { upstreamModel: "u", reasoning: false })).not.toHaveProperty("thinking")
  })

  it("defaults max_tokens above a thinking budget, clamps temperature, drops what thinking forbids", () => {
    expect(toWireRequest(base, target).max_tokens).toBe(4096)
    expect(toWireRequest({ ...base, reasoning: { enabled: true, visible: true, budgetTokens: 8000 } }, target).max_tokens).toBe(12096)
    expect(toWireRequest({ ...base, temperature: 1.7 }, target).temperature).toBe(1)
    const thinking = toWireRequest({ ...base, temperature: 0.2, topK: 5, topP: 0.5, reasoning: { enabled: true, visible: true } }, target)
    expect(thinking).not.toHaveProperty("temperature")
    expect(thinking).not.toHaveProperty("top_k")
    expect(thinking).not.toHaveProperty("top_p")
  })

  it("drops empty text and unsigned thinking, and turns a JSON format into an instruction", () => {
    const wire = toWireRequest({
      ...base,
      messages: [
        { role: "user", content: [{ type: "text", text: "" }, { type: "text", text: "q" }] },
        { role: "assistant", content: [{ type: "thinking", thinking: "foreign", signature: "" }, { type: "text", text: "a" }] }
      ],
      responseFormat: { type: "json_object" }
    }, target)
    expect(wire.messages).toEqual([
      { role: "user", content: [{ type: "text", text: "q" }] },
      { role: "assistant", content: [{ type: "text", text: "a" }] }
    ])
    expect(wire.system).toEqual([{ type: "text", text: "Respond with a single JSON object and nothing else." }])
  })

  it("builds the messages URL from base URLs with or without /v1", () => {
    expect(messagesUrl("https://api.example.com").href).toBe("https://api.example.com/v1/messages")
    expect(messagesUrl("http://127.0.0.1:9000/v1/").href).toBe("http://127.0.0.1:9000/v1/messages")
    expect(messagesUrl("http://host/proxy/anthropic").href).toBe("http://host/proxy/anthropic/v1/messages")
  })
})

describe("upstream errors", () => {
  it("reads retry-after as seconds, as an HTTP date, or from retry-after-ms", () => {
    const now = Date.parse("2026-01-01T00:00:00Z")
    expect(retryAfterSeconds({ "retry-after": "12" }, now)).toBe(12)
    expect(retryAfterSeconds({ "retry-after": "Thu, 01 Jan 2026 00:00:30 GMT" }, now)).toBe(30)
    expect(retryAfterSeconds({ "retry-after-ms": "1500" }, now)).toBe(1.5)
    expect(retryAfterSeconds({}, now)).toBeUndefined()
  })

  it("maps the gateway's own misconfiguration (401/403/404) to a retryable 502", () => {
    const placement = { modelId: "svc-atlas-1", upstreamModel: "up-9" }
    const notFound = errorFromResponse(404, {}, JSON.stringify({ type: "error", error: { type: "not_found_error", message: "model: up-9" } }), placement)
    expect(notFound).toMatchObject({ status: 502, retryable: true })
    expect(notFound.message).toContain("model: svc-atlas-1")
    expect(notFound.message).not.toContain("up-9")
    expect(errorFromResponse(413, {}, "", placement)).toMatchObject({ status: 413, retryable: false, message: "The upstream answered HTTP 413" })
  })
})
