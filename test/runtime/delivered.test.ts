import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import { countTextTokensExact } from "../../src/model/bpe.ts"
import { userMessage } from "../../src/model/content.ts"
import type { CanonicalEvent } from "../../src/model/events.ts"
import { makeRequest } from "../../src/model/request.ts"
import { countRequestTokens } from "../../src/model/tokens.ts"
import { makeUsage } from "../../src/model/usage.ts"
import { canContinueText } from "../../src/runtime/continuation.ts"
import { Delivered, runawayLine } from "../../src/runtime/delivered.ts"

const request = makeRequest({ model: "m", messages: [userMessage("Tell me about the harbor.")] })
const words = Array.from({ length: 150 }, (_, i) => `word${i} `)

describe("Delivered: one record of what a stream sent, for the continuation and the usage", () => {
  it("keeps the text, the open block and the next index for a continuation, across many deltas", () => {
    const delivered = new Delivered(request)
    delivered.add([{ type: "message_start", model: "m" }, { type: "block_start", index: 0, block: { type: "text" } }])
    for (const word of words) delivered.add([{ type: "text_delta", index: 0, text: word }])
    expect(delivered.state).toEqual({ text: words.join(""), open: { index: 0, type: "text" }, nextIndex: 1, sawToolUse: false })
    expect(canContinueText(delivered.state)).toBe(true)
    delivered.add([{ type: "block_stop", index: 0 }, { type: "block_start", index: 1, block: { type: "tool_use", id: "t", name: "f" } }])
    expect(delivered.state).toMatchObject({ open: { index: 1, type: "tool_use" }, nextIndex: 2, sawToolUse: true })
    expect(canContinueText(delivered.state)).toBe(false)
  })

  it("estimates a broken stream's output from the text, thinking and tool arguments delivered, and its input from the request", async () => {
    const delivered = new Delivered(request)
    expect(delivered.produced).toBe(false)
    const events: Array<CanonicalEvent> = [
      { type: "message_start", model: "m" },
      { type: "block_start", index: 0, block: { type: "thinking" } },
      { type: "thinking_delta", index: 0, thinking: "Let me think about boats." },
      { type: "block_stop", index: 0 },
      { type: "block_start", index: 1, block: { type: "text" } },
      ...words.map((text): CanonicalEvent => ({ type: "text_delta", index: 1, text })),
      { type: "block_stop", index: 1 },
      { type: "block_start", index: 2, block: { type: "tool_use", id: "t", name: "f" } },
      { type: "tool_input_delta", index: 2, partialJson: "{\"city\":\"Oslo\"}" }
    ]
    delivered.add(events)
    expect(delivered.produced).toBe(true)
    const expected = countTextTokensExact(words.slice(0, 64).join("")) + countTextTokensExact(words.slice(64, 128).join("")) +
      countTextTokensExact(words.slice(128).join("")) + countTextTokensExact("Let me think about boats.") + countTextTokensExact("{\"city\":\"Oslo\"}")
    expect(await Effect.runPromise(delivered.usage())).toEqual(makeUsage({ inputTokens: await Effect.runPromise(countRequestTokens(request)), outputTokens: expected }))
  })

  it("takes the input from message_start when it reports it, and the exact usage once message_stop arrives", async () => {
    const delivered = new Delivered(request)
    delivered.add([{ type: "message_start", model: "m", usage: makeUsage({ inputTokens: 77 }) }, { type: "block_start", index: 0, block: { type: "text" } }, { type: "text_delta", index: 0, text: "hello there" }])
    expect(await Effect.runPromise(delivered.usage())).toEqual(makeUsage({ inputTokens: 77, outputTokens: countTextTokensExact("hello there") }))
    const exact = makeUsage({ inputTokens: 80, outputTokens: 3 })
    delivered.add([{ type: "block_stop", index: 0 }, { type: "message_stop", stopReason: "end_turn", usage: exact }])
    expect(await Effect.runPromise(delivered.usage())).toEqual(exact)
  })

  it("overruns on text past the runaway line, and on tool calls without arguments too (each is a token at least)", () => {
    const ceiling = 16
    const capped = makeRequest({ model: "m", messages: [userMessage("go")], maxOutputTokens: ceiling })
    const text = new Delivered(capped)
    text.add([{ type: "message_start", model: "m" }, { type: "block_start", index: 0, block: { type: "text" } }])
    let words = 0
    while (text.overran === undefined && words < 10 * runawayLine(ceiling)) {
      text.add([{ type: "text_delta", index: 0, text: "word " }])
      words++
    }
    expect(text.overran).toBe(ceiling)
    expect(words).toBe(runawayLine(ceiling) + 1)
    // Named calls with empty arguments: nothing for the text floor, one token each all the same.
    const calls = new Delivered(capped)
    calls.add([{ type: "message_start", model: "m" }])
    let index = 0
    while (calls.overran === undefined && index < 10 * runawayLine(ceiling)) {
      calls.add([{ type: "block_start", index, block: { type: "tool_use", id: `t${index}`, name: "lookup" } }, { type: "block_stop", index }])
      index++
    }
    expect(calls.overran).toBe(ceiling)
    expect(index).toBe(runawayLine(ceiling) + 1)
  })
})
