import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { PROMPT_CACHE_MIN_TOKENS, promptPrefixes } from "../../src/backends/simulator/prompt-cache.ts"
import { makeSimulatorBackend, simulatorPlacement } from "../../src/backends/simulator/simulator.ts"
import { assistantMessage, userMessage } from "../../src/model/content.ts"
import type { CanonicalRequest } from "../../src/model/request.ts"
import { makeRequest } from "../../src/model/request.ts"
import { countRequestTokens } from "../../src/model/tokens.ts"
import { plainModel, runEvents } from "./support.ts"

const longSystem = [{ type: "text" as const, text: "You are a careful assistant who checks every fact. ".repeat(150) }]

const firstTurn = (affinity?: string): CanonicalRequest =>
  makeRequest({
    model: "svc-sim-plain",
    system: longSystem,
    messages: [userMessage("What is the capital of France?")],
    ...(affinity === undefined ? {} : { cacheAffinity: affinity })
  })

const secondTurn = (affinity?: string): CanonicalRequest => ({
  ...firstTurn(affinity),
  messages: [...firstTurn().messages, assistantMessage("Paris."), userMessage("And of Italy?")]
})

describe("simulated prompt cache", () => {
  it.effect("prefixes are message-aligned and end at the whole prompt", () =>
    Effect.gen(function*() {
      const prefixes = yield* promptPrefixes(secondTurn())
      assert.strictEqual(prefixes.length, 4)
      assert.strictEqual(prefixes[3].tokens, yield* countRequestTokens(secondTurn()))
      assert.isAbove(prefixes[0].tokens, PROMPT_CACHE_MIN_TOKENS)
    }))

  it.effect("a later turn of the same conversation reads the shared prefix from the cache", () =>
    Effect.gen(function*() {
      const backend = makeSimulatorBackend()
      const first = (yield* runEvents(firstTurn("conv-1"), plainModel, backend)).response
      assert.strictEqual(first.usage.cachedInputTokens, 0)
      const second = (yield* runEvents(secondTurn("conv-1"), plainModel, backend)).response
      assert.strictEqual(second.usage.cachedInputTokens, yield* countRequestTokens(firstTurn()))
      assert.isBelow(second.usage.cachedInputTokens, second.usage.inputTokens)
    }))

  it.effect("another affinity key, another placement or a fresh backend start cold", () =>
    Effect.gen(function*() {
      const backend = makeSimulatorBackend()
      yield* runEvents(firstTurn("conv-1"), plainModel, backend)
      const otherKey = (yield* runEvents(secondTurn("conv-2"), plainModel, backend)).response
      assert.strictEqual(otherKey.usage.cachedInputTokens, 0)
      const otherPlacement = simulatorPlacement({ modelId: "svc-sim-plain", id: "svc-sim-plain@second" })
      const cold = (yield* runEvents(secondTurn("conv-1"), otherPlacement, backend)).response
      assert.strictEqual(cold.usage.cachedInputTokens, 0)
      const fresh = (yield* runEvents(secondTurn("conv-1"), plainModel, makeSimulatorBackend())).response
      assert.strictEqual(fresh.usage.cachedInputTokens, 0)
    }))

  it.effect("short prompts are never cached", () =>
    Effect.gen(function*() {
      const backend = makeSimulatorBackend()
      const short = makeRequest({ model: "svc-sim-plain", messages: [userMessage("hi")] })
      yield* runEvents(short, plainModel, backend)
      const again = (yield* runEvents(short, plainModel, backend)).response
      assert.strictEqual(again.usage.cachedInputTokens, 0)
    }))
})
