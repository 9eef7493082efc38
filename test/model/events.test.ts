import { assert, describe, it } from "@effect/vitest"
import { Effect, Stream } from "effect"
import { expect } from "vitest"
import { eventOrderViolation } from "../../src/model/event-order.ts"
import type { CanonicalEvent } from "../../src/model/events.ts"
import { collect, collectStream, makeResponseBuilder } from "../../src/model/events.ts"
import { makeUsage } from "../../src/model/usage.ts"

const usage = makeUsage({ inputTokens: 20, outputTokens: 12, reasoningTokens: 4 })

const turn: ReadonlyArray<CanonicalEvent> = [
  { type: "message_start", model: "svc-test", id: "up_1", usage: makeUsage({ inputTokens: 20 }) },
  { type: "block_start", index: 0, block: { type: "thinking" } },
  { type: "thinking_delta", index: 0, thinking: "Let me " },
  { type: "thinking_delta", index: 0, thinking: "think." },
  { type: "signature_delta", index: 0, signature: "sig==" },
  { type: "block_stop", index: 0 },
  { type: "block_start", index: 1, block: { type: "text" } },
  { type: "text_delta", index: 1, text: "Checking " },
  { type: "text_delta", index: 1, text: "the weather." },
  { type: "block_stop", index: 1 },
  { type: "block_start", index: 2, block: { type: "tool_use", id: "toolu_1", name: "get_weather" } },
  { type: "tool_input_delta", index: 2, partialJson: "{\"city\":" },
  { type: "tool_input_delta", index: 2, partialJson: "\"Paris\"}" },
  { type: "block_stop", index: 2 },
  { type: "message_stop", stopReason: "tool_use", usage }
]

describe("collect", () => {
  it("assembles blocks, stop reason and usage from a turn", () => {
    assert.deepStrictEqual(collect(turn), {
      id: "up_1",
      model: "svc-test",
      content: [
        { type: "thinking", thinking: "Let me think.", signature: "sig==" },
        { type: "text", text: "Checking the weather." },
        { type: "tool_use", id: "toolu_1", name: "get_weather", input: { city: "Paris" } }
      ],
      stopReason: "tool_use",
      usage
    })
  })

  it("reports the matched stop sequence", () => {
    const events: ReadonlyArray<CanonicalEvent> = [
      { type: "message_start", model: "m" },
      { type: "message_stop", stopReason: "stop_sequence", stopSequence: "END", usage }
    ]
    const response = collect(events)
    assert.strictEqual(response.stopSequence, "END")
    assert.deepStrictEqual(response.content, [])
  })

  it("turns truncated tool arguments into an empty object", () => {
    const events: ReadonlyArray<CanonicalEvent> = [
      { type: "message_start", model: "m" },
      { type: "block_start", index: 0, block: { type: "tool_use", id: "t", name: "f" } },
      { type: "tool_input_delta", index: 0, partialJson: "{\"city\": \"Par" },
      { type: "block_stop", index: 0 },
      { type: "message_stop", stopReason: "max_tokens", usage }
    ]
    assert.deepStrictEqual(collect(events).content, [{ type: "tool_use", id: "t", name: "f", input: {} }])
  })

  it("throws when the stream never stopped", () => {
    expect(() => collect(turn.slice(0, -1))).toThrow(/message_stop/)
  })

  it("lets an encoder read a block's content while the stream is still running", () => {
    const builder = makeResponseBuilder()
    for (const event of turn.slice(0, 12)) builder.add(event)
    assert.deepStrictEqual(builder.block(1), { type: "text", text: "Checking the weather." })
    assert.strictEqual(builder.toolInputJson(2), "{\"city\":")
    assert.strictEqual(builder.block(7), undefined)
  })

  it.effect("collectStream runs a backend stream into a response", () =>
    Effect.gen(function*() {
      const response = yield* collectStream(Stream.fromIterable(turn))
      assert.strictEqual(response.content.length, 3)
      assert.strictEqual(response.stopReason, "tool_use")
    }))

  it.effect("collectStream passes the stream's failure through", () =>
    Effect.gen(function*() {
      const error = yield* collectStream(Stream.concat(Stream.fromIterable(turn.slice(0, 3)), Stream.fail("boom"))).pipe(Effect.flip)
      assert.strictEqual(error, "boom")
    }))
})

describe("eventOrderViolation", () => {
  it("accepts a well-formed turn", () => {
    assert.strictEqual(eventOrderViolation(turn), undefined)
  })

  const broken: ReadonlyArray<[string, ReadonlyArray<CanonicalEvent>, RegExp]> = [
    ["no message_start", turn.slice(1), /first event/],
    ["no message_stop", turn.slice(0, -1), /no message_stop/],
    ["two message_starts", [turn[0], ...turn], /second message_start/],
    ["a skipped index", [turn[0], { type: "block_start", index: 1, block: { type: "text" } }], /expected index 0/],
    ["interleaved blocks", [turn[0], turn[1], turn[6]], /still open/],
    ["a text delta in a thinking block", [turn[0], turn[1], { type: "text_delta", index: 0, text: "x" }], /not allowed/],
    ["a delta for a closed block", [...turn.slice(0, 6), turn[2]], /not open/],
    ["an unclosed block at the end", [...turn.slice(0, 3), turn[turn.length - 1]], /never stopped/],
    ["events after message_stop", [...turn, turn[1]], /after message_stop/]
  ]
  for (const [name, events, message] of broken) {
    it(`rejects ${name}`, () => {
      expect(eventOrderViolation(events)).toMatch(message)
    })
  }
})
