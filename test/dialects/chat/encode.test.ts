/**
 * Canonical answer → Chat Completions body and SSE chunks, checked against wire-protocols.md §2
 * and the gateway breakages it lists (4 tool deltas without index, 5 missing finish_reason,
 * 6 usage chunk with choices, 9 empty data, 10 keepalives as data, 12 `event:` lines).
 */
import { Effect, Stream } from "effect"
import { describe, expect, it } from "vitest"
import { makeSimulatorBackend, simulatorPlacement } from "../../../src/backends/simulator/simulator.ts"
import { chatDialect } from "../../../src/dialects/chat/index.ts"
import type { ChatEcho } from "../../../src/dialects/chat/index.ts"
import { userMessage } from "../../../src/model/content.ts"
import type { CanonicalEvent, StopReason } from "../../../src/model/events.ts"
import { collect } from "../../../src/model/events.ts"
import { makeRequest } from "../../../src/model/request.ts"
import { makeUsage } from "../../../src/model/usage.ts"
import { contextFor, encodeEvents, sseFrames } from "./support.ts"

const usage = makeUsage({ inputTokens: 100, cachedInputTokens: 40, outputTokens: 30, reasoningTokens: 12 })

/** Thinking, text, then two tool calls: everything the encoder must handle in one turn. */
const turn: Array<CanonicalEvent> = [
  { type: "message_start", model: "svc-nova-mini", usage: makeUsage({ inputTokens: 100 }) },
  { type: "block_start", index: 0, block: { type: "thinking" } },
  { type: "thinking_delta", index: 0, thinking: "secret plan" },
  { type: "signature_delta", index: 0, signature: "sig" },
  { type: "block_stop", index: 0 },
  { type: "block_start", index: 1, block: { type: "text" } },
  { type: "text_delta", index: 1, text: "Checking " },
  { type: "text_delta", index: 1, text: "now." },
  { type: "block_stop", index: 1 },
  { type: "block_start", index: 2, block: { type: "tool_use", id: "call_a", name: "get_weather" } },
  { type: "tool_input_delta", index: 2, partialJson: "{\"city\":" },
  { type: "tool_input_delta", index: 2, partialJson: "\"Paris\"}" },
  { type: "block_stop", index: 2 },
  { type: "block_start", index: 3, block: { type: "tool_use", id: "call_b", name: "get_time" } },
  { type: "tool_input_delta", index: 3, partialJson: "{}" },
  { type: "block_stop", index: 3 },
  { type: "message_stop", stopReason: "tool_use", usage }
]

const encode = (events: ReadonlyArray<CanonicalEvent>, includeUsage: boolean) =>
  encodeEvents(chatDialect, contextFor<ChatEcho>({ includeUsage }), events)

describe("chat body", () => {
  const body = (events: ReadonlyArray<CanonicalEvent>) => chatDialect.encodeResponse(collect(events), contextFor<ChatEcho>({ includeUsage: false })) as any

  it("carries text, tool calls as JSON strings, usage details, and drops thinking", () => {
    const out = body(turn)
    expect(out).toMatchObject({ id: "chatcmpl-test", object: "chat.completion", created: 1_700_000_000, model: "svc-nova-mini", system_fingerprint: null })
    expect(out.choices).toEqual([{
      index: 0,
      message: {
        role: "assistant",
        content: "Checking now.",
        refusal: null,
        tool_calls: [
          { id: "call_a", type: "function", function: { name: "get_weather", arguments: "{\"city\":\"Paris\"}" } },
          { id: "call_b", type: "function", function: { name: "get_time", arguments: "{}" } }
        ],
        annotations: []
      },
      logprobs: null,
      finish_reason: "tool_calls"
    }])
    expect(out.usage).toEqual({
      prompt_tokens: 100,
      completion_tokens: 30,
      total_tokens: 130,
      prompt_tokens_details: { cached_tokens: 40 },
      completion_tokens_details: { reasoning_tokens: 12 }
    })
    expect(JSON.stringify(out)).not.toContain("secret plan")
  })

  it("sends null content for a turn of tool calls only, and an empty string for no output", () => {
    const toolsOnly = turn.filter((event) => !("index" in event) || event.index >= 2)
      .map((event) => ("index" in event ? { ...event, index: event.index - 2 } : event)) as Array<CanonicalEvent>
    expect(body(toolsOnly).choices[0].message.content).toBeNull()
    const empty: Array<CanonicalEvent> = [turn[0], { type: "message_stop", stopReason: "max_tokens", usage }]
    expect(body(empty).choices[0].message).toMatchObject({ content: "", refusal: null })
    expect(body(empty).choices[0].message.tool_calls).toBeUndefined()
  })

  it("maps every stop reason to a finish_reason", () => {
    const cases: Array<[StopReason, string]> = [
      ["end_turn", "stop"], ["stop_sequence", "stop"], ["max_tokens", "length"], ["tool_use", "tool_calls"], ["refusal", "content_filter"]
    ]
    for (const [stopReason, finish] of cases) {
      expect(body([turn[0], { type: "message_stop", stopReason, usage }]).choices[0].finish_reason).toBe(finish)
    }
  })
})

describe("chat stream", () => {
  it("uses data-only frames ending in [DONE], one id, role first, finish_reason last (gotchas 5, 9, 12)", () => {
    const text = encode(turn, false)
    expect(text).not.toMatch(/^event:/m)
    const frames = sseFrames(text)
    for (const frame of frames) expect(frame.lines.every((line) => line.startsWith("data: ") && line.length > 6)).toBe(true)
    expect(frames.at(-1)!.data).toBe("[DONE]")
    const chunks = frames.slice(0, -1).map((frame) => frame.data)
    expect(new Set(chunks.map((chunk) => chunk.id))).toEqual(new Set(["chatcmpl-test"]))
    expect(chunks.every((chunk) => chunk.object === "chat.completion.chunk" && chunk.model === "svc-nova-mini")).toBe(true)
    expect(chunks[0].choices[0].delta).toMatchObject({ role: "assistant", content: "" })
    expect(chunks.at(-1).choices[0]).toMatchObject({ delta: {}, finish_reason: "tool_calls" })
    expect(chunks.slice(0, -1).every((chunk) => chunk.choices[0].finish_reason === null)).toBe(true)
    expect(chunks.every((chunk) => !("usage" in chunk))).toBe(true)
    expect(text).not.toContain("secret plan")
  })

  it("numbers tool calls by position with index on every fragment, id/type/name first (gotcha 4)", () => {
    const fragments = sseFrames(encode(turn, false)).slice(0, -1)
      .flatMap((frame) => frame.data.choices[0].delta.tool_calls ?? [])
    expect(fragments).toEqual([
      { index: 0, id: "call_a", type: "function", function: { name: "get_weather", arguments: "" } },
      { index: 0, function: { arguments: "{\"city\":" } },
      { index: 0, function: { arguments: "\"Paris\"}" } },
      { index: 1, id: "call_b", type: "function", function: { name: "get_time", arguments: "" } },
      { index: 1, function: { arguments: "{}" } }
    ])
  })

  it("with include_usage: usage null before, then a usage chunk with choices [] before [DONE] (gotcha 6)", () => {
    const frames = sseFrames(encode(turn, true))
    expect(frames.at(-1)!.data).toBe("[DONE]")
    const usageChunk = frames.at(-2)!.data
    expect(usageChunk.choices).toEqual([])
    expect(usageChunk.id).toBe("chatcmpl-test")
    expect(usageChunk.usage).toMatchObject({ prompt_tokens: 100, completion_tokens: 30, total_tokens: 130 })
    const earlier = frames.slice(0, -2).map((frame) => frame.data)
    expect(earlier.every((chunk) => chunk.usage === null && chunk.choices.length === 1)).toBe(true)
    expect(earlier.at(-1).choices[0].finish_reason).toBe("tool_calls")
  })

  it("writes a text delta's frame byte for byte as JSON.stringify of the whole chunk, whatever the text, id or model", () => {
    const texts = ["plain", "", "quote \" backslash \\ slash /", "line\nbreak\r\ttab", "\u0000svc-text\u0000", "\ud800 lone", "🙂 emoji", "</script>", "\u2028\u2029"]
    const contexts = [
      contextFor<ChatEcho>({ includeUsage: false }),
      contextFor<ChatEcho>({ includeUsage: true }),
      // An id holding the encoder's own marker: the frames must still be right.
      { ...contextFor<ChatEcho>({ includeUsage: true }), id: "chatcmpl-\u0000svc-text\u0000", model: "model \"quoted\"" }
    ]
    for (const context of contexts) {
      const encoder = chatDialect.streamEncoder(context)
      for (const text of texts) {
        const expected = text === "" ? "" : `data: ${JSON.stringify({
          id: context.id,
          object: "chat.completion.chunk",
          created: context.createdAt,
          model: context.model,
          system_fingerprint: null,
          choices: [{ index: 0, delta: { content: text }, logprobs: null, finish_reason: null }],
          ...(context.echo.includeUsage ? { usage: null } : {})
        })}\n\n`
        expect(encoder.event({ type: "text_delta", index: 0, text })).toBe(expected)
      }
    }
  })

  it("keepalives and switchovers are comments (gotcha 10); a failure is an error chunk without [DONE]", () => {
    const encoder = chatDialect.streamEncoder(contextFor<ChatEcho>({ includeUsage: false }))
    expect(encoder.keepalive()).toMatch(/^: [^\n]*\n\n$/)
    expect(encoder.switchover("moved to\nplacement b")).toBe(": moved to placement b\n\n")
    encoder.event(turn[0])
    const failure = encoder.error({ status: 503, type: "overloaded_error", message: "busy" })
    expect(sseFrames(failure).map((frame) => frame.data)).toEqual([
      { error: { message: "busy", type: "overloaded_error", param: null, code: null } }
    ])
    expect(failure).not.toContain("[DONE]")
  })

  it("assembles, as a client would, into exactly the non-streaming body (simulator, parallel tools)", async () => {
    const request = makeRequest({
      model: "svc-sim",
      messages: [userMessage("call get_weather and get_time please")],
      tools: [
        { name: "get_weather", inputSchema: { type: "object", properties: { city: { type: "string" } }, required: ["city"] } },
        { name: "get_time", inputSchema: { type: "object", properties: { zone: { type: "string" } }, required: ["zone"] } }
      ]
    })
    const events = await Effect.runPromise(Stream.runCollect(makeSimulatorBackend().stream(request, simulatorPlacement({ modelId: "svc-sim" }))))
    const context = contextFor<ChatEcho>({ includeUsage: true }, request)
    const body = chatDialect.encodeResponse(collect(events), context) as any
    const chunks = sseFrames(encodeEvents(chatDialect, context, events)).map((frame) => frame.data).filter((data) => data !== "[DONE]")
    const message: any = { role: undefined, content: "", tool_calls: [] }
    let finish: string | undefined
    for (const chunk of chunks) {
      for (const choice of chunk.choices) {
        if (choice.delta.role !== undefined) message.role = choice.delta.role
        if (choice.delta.content) message.content += choice.delta.content
        for (const fragment of choice.delta.tool_calls ?? []) {
          const call = (message.tool_calls[fragment.index] ??= { id: fragment.id, type: fragment.type, function: { name: fragment.function.name, arguments: "" } })
          call.function.arguments += fragment.function.arguments
        }
        finish = choice.finish_reason ?? finish
      }
    }
    expect(message.tool_calls).toHaveLength(2)
    expect(message.tool_calls).toEqual(body.choices[0].message.tool_calls)
    expect(message.role).toBe("assistant")
    expect(finish).toBe(body.choices[0].finish_reason)
    expect(chunks.at(-1).usage).toEqual(body.usage)
  })
})
