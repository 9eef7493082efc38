/**
 * Canonical → Messages wire: the message envelope (every block kind, the usage split) and the SSE
 * sequence of wire-protocols.md §1, checked against gotchas 1, 2, 3, 9 and 10.
 */
import { describe, expect, it } from "vitest"
import type { EncodeContext } from "../../../src/dialects/dialect.ts"
import { messagesDialect } from "../../../src/dialects/messages/index.ts"
import type { CanonicalEvent } from "../../../src/model/events.ts"
import { collect } from "../../../src/model/events.ts"
import { makeRequest } from "../../../src/model/request.ts"
import { makeUsage } from "../../../src/model/usage.ts"
import { fullTurn } from "./fixtures.ts"

const context: EncodeContext<undefined> = {
  id: "msg_test1",
  model: "svc-atlas-1",
  createdAt: 1_767_225_600,
  request: makeRequest({ model: "svc-atlas-1", messages: [] }),
  echo: undefined
}

interface Frame {
  readonly event: string
  readonly data: any
}

/** Splits SSE text into frames, failing on any frame that is not `event:` + one JSON `data:` line. */
const frames = (text: string): Array<Frame> => {
  expect(text.endsWith("\n\n")).toBe(true)
  return text.slice(0, -2).split("\n\n").map((raw) => {
    const lines = raw.split("\n")
    expect(lines).toHaveLength(2)
    expect(lines[0]).toMatch(/^event: [a-z_]+$/)
    expect(lines[1]).toMatch(/^data: \{.*\}$/)
    const data = JSON.parse(lines[1].slice("data: ".length))
    const event = lines[0].slice("event: ".length)
    expect(data.type).toBe(event)
    return { event, data }
  })
}

const encodeAll = (events: ReadonlyArray<CanonicalEvent>) => {
  const encoder = messagesDialect.streamEncoder(context)
  return events.map((event) => encoder.event(event)).join("")
}

describe("messages encodeResponse", () => {
  it("encodes every block kind, the stop fields and the usage split", () => {
    const body = messagesDialect.encodeResponse(collect(fullTurn), context)
    expect(body).toEqual({
      id: "msg_test1",
      type: "message",
      role: "assistant",
      model: "svc-atlas-1",
      content: [
        { type: "thinking", thinking: "Let me think.", signature: "c2lnbmF0dXJl" },
        { type: "redacted_thinking", data: "b3BhcXVl" },
        { type: "text", text: "Hi there" },
        { type: "tool_use", id: "toolu_1", name: "get_weather", input: { city: "Oslo" } }
      ],
      stop_reason: "tool_use",
      stop_sequence: null,
      usage: {
        input_tokens: 20,
        output_tokens: 57,
        cache_creation_input_tokens: 0,
        cache_read_input_tokens: 100,
        output_tokens_details: { thinking_tokens: 20 }
      }
    })
  })

  it("reports the matched stop sequence, and no thinking details without reasoning", () => {
    const body = messagesDialect.encodeResponse({
      model: "svc-lyra-3",
      content: [{ type: "text", text: "one two" }],
      stopReason: "stop_sequence",
      stopSequence: "three",
      usage: makeUsage({ inputTokens: 9, outputTokens: 2 })
    }, context) as any
    expect(body.stop_reason).toBe("stop_sequence")
    expect(body.stop_sequence).toBe("three")
    expect(body.usage).toEqual({ input_tokens: 9, output_tokens: 2, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 })
  })
})

describe("messages stream encoder", () => {
  it("writes a text delta's frame byte for byte as JSON.stringify of the whole event, whatever the text", () => {
    const encoder = messagesDialect.streamEncoder(context)
    for (const text of ["plain", "", "quote \" backslash \\", "line\nbreak\r\ttab", "\ud800 lone", "🙂", "</script>", "\u2028\u2029", "\u0000"]) {
      for (const index of [0, 7, 1234]) {
        const data = { type: "content_block_delta", index, delta: { type: "text_delta", text } }
        expect(encoder.event({ type: "text_delta", index, text })).toBe(`event: content_block_delta\ndata: ${JSON.stringify(data)}\n\n`)
      }
    }
  })

  it("produces exactly the wire sequence, every frame named and with JSON data (gotchas 1, 9)", () => {
    const out = frames(encodeAll(fullTurn))
    expect(out.map((f) => f.event)).toEqual([
      "message_start",
      "content_block_start", "content_block_delta", "content_block_delta", "content_block_delta", "content_block_stop",
      "content_block_start", "content_block_stop",
      "content_block_start", "content_block_delta", "content_block_delta", "content_block_stop",
      "content_block_start", "content_block_delta", "content_block_delta", "content_block_stop",
      "message_delta",
      "message_stop"
    ])
  })

  it("starts with one message_start with empty content and input usage (gotcha 2)", () => {
    const out = frames(encodeAll(fullTurn))
    expect(out.filter((f) => f.event === "message_start")).toHaveLength(1)
    expect(out[0].data.message).toEqual({
      id: "msg_test1",
      type: "message",
      role: "assistant",
      model: "svc-atlas-1",
      content: [],
      stop_reason: null,
      stop_sequence: null,
      usage: { input_tokens: 20, output_tokens: 0, cache_creation_input_tokens: 0, cache_read_input_tokens: 100 }
    })
  })

  it("starts blocks empty, numbers them in order and sends one signature delta", () => {
    const out = frames(encodeAll(fullTurn))
    const starts = out.filter((f) => f.event === "content_block_start").map((f) => f.data)
    expect(starts).toEqual([
      { type: "content_block_start", index: 0, content_block: { type: "thinking", thinking: "", signature: "" } },
      { type: "content_block_start", index: 1, content_block: { type: "redacted_thinking", data: "b3BhcXVl" } },
      { type: "content_block_start", index: 2, content_block: { type: "text", text: "" } },
      { type: "content_block_start", index: 3, content_block: { type: "tool_use", id: "toolu_1", name: "get_weather", input: {} } }
    ])
    const deltas = out.filter((f) => f.event === "content_block_delta").map((f) => f.data)
    expect(deltas.map((d) => [d.index, d.delta])).toEqual([
      [0, { type: "thinking_delta", thinking: "Let me " }],
      [0, { type: "thinking_delta", thinking: "think." }],
      [0, { type: "signature_delta", signature: "c2lnbmF0dXJl" }],
      [2, { type: "text_delta", text: "Hi" }],
      [2, { type: "text_delta", text: " there" }],
      [3, { type: "input_json_delta", partial_json: "{\"city\":" }],
      [3, { type: "input_json_delta", partial_json: "\"Oslo\"}" }]
    ])
  })

  it("ends with message_delta carrying stop fields and cumulative usage, then message_stop (gotcha 3)", () => {
    const out = frames(encodeAll(fullTurn))
    expect(out.at(-2)!.data).toEqual({
      type: "message_delta",
      delta: { stop_reason: "tool_use", stop_sequence: null },
      usage: { input_tokens: 20, output_tokens: 57, cache_creation_input_tokens: 0, cache_read_input_tokens: 100, output_tokens_details: { thinking_tokens: 20 } }
    })
    expect(out.at(-1)!.data).toEqual({ type: "message_stop" })
  })

  it("keepalives are ping events or comments, never bare data (gotcha 10)", () => {
    const encoder = messagesDialect.streamEncoder(context)
    expect(encoder.keepalive()).toBe("event: ping\ndata: {\"type\":\"ping\"}\n\n")
    expect(encoder.switchover("moved to\nanother placement")).toBe(": moved to another placement\n\n")
  })

  it("ends a broken stream with an error event in the SDK's types", () => {
    const encoder = messagesDialect.streamEncoder(context)
    const error = (status: number, type: string) => frames(encoder.error({ status, type, message: "nope" }))[0]
    expect(error(529, "overloaded_error")).toEqual({ event: "error", data: { type: "error", error: { type: "overloaded_error", message: "nope" } } })
    expect(error(500, "api_error").data.error.type).toBe("api_error")
    expect(error(429, "rate_limit_error").data.error.type).toBe("rate_limit_error")
    expect(error(503, "something_else").data.error.type).toBe("overloaded_error")
    expect(error(502, "something_else").data.error.type).toBe("api_error")
  })

  it("reports zero usage on a message_start that carries none", () => {
    const out = frames(encodeAll([{ type: "message_start", model: "svc-atlas-1" }]))
    expect(out[0].data.message.usage).toEqual({ input_tokens: 0, output_tokens: 0, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 })
  })
})
