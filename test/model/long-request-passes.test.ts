/**
 * Every pass over a request's messages offers a pause every 128 messages, so a request of tens of
 * thousands of messages is walked in slices between other clients' turns (`util/slices.ts`): the
 * dialects' decode (messages: the turns merged), the model's requirements, the token bound's and
 * the exact count's parts, and both upstream translations. Each pass gives what it gave at once.
 */
import { Effect, Exit } from "effect"
import { describe, expect, it, vi } from "vitest"
import { anthropicWireBody } from "../../src/backends/anthropic/index.ts"
import { wireRequest as anthropicWire } from "../../src/backends/anthropic/wire-request.ts"
import { openAiWireBody } from "../../src/backends/openai-compatible/index.ts"
import { largeToolInputs, wireRequest as openAiWire } from "../../src/backends/openai-compatible/wire-request.ts"
import { makePromptCache, PROMPT_CACHE_MIN_TOKENS, promptJson } from "../../src/backends/simulator/prompt-cache.ts"
import { simulatorPlacement } from "../../src/backends/simulator/simulator.ts"
import { prepareRequest } from "../../src/catalog/requirements.ts"
import type { ChatModel } from "../../src/config/schema.ts"
import { messagesRequestOf } from "../../src/dialects/messages/decode.ts"
import { assistantMessage, type Message, userMessage } from "../../src/model/content.ts"
import { makeRequest } from "../../src/model/request.ts"
import { countPartTokens, countRequestTokens, promptParts, requestTokenBound, textsTokenBound } from "../../src/model/tokens.ts"
import { runAtOnce, SLICE_MS } from "../../src/util/slices.ts"
import { loopTurnsDuring, pausesOf } from "../support/loop-turns.ts"

const COUNT = 20_000
/** Pauses a pass over COUNT messages offers: one after every 128th. */
const PAUSES = Math.floor(COUNT / 128)
/** The loop's turns seen while a pass yields at each of its PAUSES: one fewer when its last turn is counted before the counter's (`loopTurnsDuring`). */
const TURNS = PAUSES - 1

const conversation = (count: number, last?: Message): Array<Message> => [
  ...Array.from({ length: count - 1 }, (_, i) => (i % 2 === 0 ? userMessage(`question ${i}`) : assistantMessage([
    { type: "text", text: `answer ${i}` },
    { type: "tool_use", id: `call_${i}`, name: "lookup", input: { i } }
  ]))),
  last ?? userMessage("the end")
]
const long = makeRequest({ model: "svc-x", messages: conversation(COUNT) })
const placement = simulatorPlacement({ modelId: "svc-x", upstreamModel: "up" })

const model = (vision: boolean): ChatModel => ({
  id: "svc-x",
  displayName: "x",
  ownedBy: "svc",
  created: 0,
  tier: "workhorse",
  contextWindow: 10_000_000,
  maxOutput: 4096,
  capabilities: { tools: true, reasoning: false, vision, documents: true },
  pricing: { input: 1, output: 1, cachedInput: null },
  supportedParameters: [],
  nativeWires: ["chat_completions"],
  placements: []
} as unknown as ChatModel)

/**
 * Runs `work` with a clock that moves SLICE_MS at every reading, so a sliced pass's driver finds
 * its slice used up at each pause and yields there, however fast the machine: the event loop's turns
 * during `work` show that the pass was run in slices, not at once.
 */
const withFastClock = async <A>(work: () => Promise<A>) => {
  let now = performance.now()
  const clock = vi.spyOn(performance, "now").mockImplementation(() => (now += SLICE_MS))
  try {
    return await loopTurnsDuring(work)
  } finally {
    clock.mockRestore()
  }
}

describe("passes over a long request", () => {
  it("the upstream translations pause every 128 messages and give the body they give at once", () => {
    for (const wire of [() => openAiWire(long, placement), () => anthropicWire(long, placement)]) {
      const { value, pauses } = pausesOf(wire())
      expect(pauses).toBe(PAUSES)
      expect(value).toEqual(runAtOnce(wire()))
      expect((value.messages as Array<unknown>).length).toBeGreaterThanOrEqual(COUNT)
    }
    const inputs = pausesOf(largeToolInputs(long, () => true))
    expect(inputs.pauses).toBe(PAUSES)
    expect(inputs.value).toHaveLength(Math.floor((COUNT - 1) / 2))
  })

  it("the backends run their translations in slices", async () => {
    // Each pass's pauses become the loop's turns (the fast clock): OpenAI-compatible, the search
    // for large tool-call inputs and the translation; Anthropic, the translation.
    const openAi = await withFastClock(() => Effect.runPromise(openAiWireBody(long, placement, true)))
    expect(openAi.turns).toBeGreaterThanOrEqual(2 * PAUSES - 1)
    expect(openAi.value).toEqual(runAtOnce(openAiWire(long, placement)))
    const anthropic = await withFastClock(() => Effect.runPromise(anthropicWireBody(long, placement, true)))
    expect(anthropic.turns).toBeGreaterThanOrEqual(TURNS)
    expect(anthropic.value).toEqual(runAtOnce(anthropicWire(long, placement)))
  })

  it("the Messages decode pauses in its merge of the turns too", () => {
    const body = { model: "svc-x", max_tokens: 16, messages: Array.from({ length: COUNT }, (_, i) => ({ role: i % 2 ? "assistant" : "user", content: `m${i}` })) }
    const { value, pauses } = pausesOf(messagesRequestOf(body))
    // The wire messages' decode, then the merge: a pause every 128 messages in each.
    expect(pauses).toBe(2 * PAUSES)
    expect(value.messages).toHaveLength(COUNT)
  })

  it("the model's requirements are checked between turns, and an image at the very end is still found", async () => {
    const withImage = makeRequest({
      model: "svc-x",
      messages: conversation(4 * COUNT, userMessage([{ type: "image", source: { kind: "url", url: "https://example.com/a.png" } }]))
    })
    const refused = await withFastClock(() => Effect.runPromiseExit(prepareRequest(model(false), withImage)))
    expect(Exit.isFailure(refused.value) && JSON.stringify(refused.value.cause)).toContain("does not accept images")
    expect(refused.turns).toBeGreaterThan(PAUSES)
    const served = await Effect.runPromiseExit(prepareRequest(model(true), withImage))
    expect(Exit.isSuccess(served)).toBe(true)
  })

  it("the bound looks for large JSON values between turns, then bounds the texts as before", async () => {
    const parts = await Effect.runPromise(promptParts(long))
    const texts = parts.flatMap((part) => part.texts.map((text) => (typeof text === "string" ? text : text.pieces.join(""))))
    const flat = parts.reduce((sum, part) => sum + part.flat, 0)
    // The texts' bound yields by their size, not by the clock: its turns are the same either way.
    const textsOnly = await withFastClock(() => Effect.runPromise(textsTokenBound(texts)))
    const whole = await withFastClock(() => Effect.runPromise(requestTokenBound(long)))
    expect(whole.value).toBe(textsOnly.value + flat)
    expect(whole.turns).toBeGreaterThanOrEqual(textsOnly.turns + TURNS)
  })

  it("the exact count's parts are made between turns and count what they counted at once", async () => {
    const { value: parts, turns } = await withFastClock(() => Effect.runPromise(promptParts(makeRequest({ model: "svc-x", messages: conversation(4 * COUNT) }))))
    expect(turns).toBeGreaterThan(PAUSES)
    expect(parts).toHaveLength(4 * COUNT + 1)
    const small = makeRequest({ model: "svc-x", messages: conversation(301) })
    const counted = await Effect.runPromise(countRequestTokens(small))
    const byParts = await Effect.runPromise(Effect.flatMap(promptParts(small), countPartTokens))
    expect(counted).toBe(byParts.reduce((sum, n) => sum + n, 0))
  })

  it("the simulator's prompt JSON and its prompt cache pass over the messages between turns", async () => {
    const json = await withFastClock(() => Effect.runPromise(promptJson(long)))
    expect(json.turns).toBeGreaterThanOrEqual(TURNS)
    expect(json.value.messages.map((pieces) => pieces.join(""))).toEqual(long.messages.map((message) => JSON.stringify(message)))
    // Every prefix long enough to cache: each is remembered, and a second pass reads the longest.
    const prefixes = Array.from({ length: COUNT }, (_, i) => ({ hash: i, tokens: PROMPT_CACHE_MIN_TOKENS + i }))
    const cache = makePromptCache(2 * COUNT)
    const first = await withFastClock(() => Effect.runPromise(cache.readAndStore("scope", prefixes)))
    expect(first.value).toBe(0)
    expect(first.turns).toBeGreaterThanOrEqual(TURNS)
    expect(await Effect.runPromise(cache.readAndStore("scope", prefixes))).toBe(PROMPT_CACHE_MIN_TOKENS + COUNT - 1)
  })

  it("the simulator's prompt JSON of a message of megabytes is made in slices, the same text", async () => {
    const big = { ...long, messages: [{ role: "user" as const, content: "é \"q\" ".repeat(600_000) }, ...long.messages.slice(0, 3)] } as typeof long
    const json = await Effect.runPromise(promptJson(big))
    expect(json.messages[0]!.length).toBeGreaterThan(1)
    expect(json.messages.map((pieces) => pieces.join(""))).toEqual(big.messages.map((message) => JSON.stringify(message)))
  })
})
