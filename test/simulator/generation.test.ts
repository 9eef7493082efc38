import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { simulatorPlacement } from "../../src/backends/simulator/simulator.ts"
import { SIMULATOR_VOCABULARY } from "../../src/backends/simulator/words.ts"
import { countTextTokensExact as countTextTokens } from "../../src/model/bpe.ts"
import { countRequestTokens } from "../../src/model/tokens.ts"
import { ask, reasoningModel, runEvents, textOf } from "./support.ts"

const prompt = "Tell me something about rivers."

describe("simulator text", () => {
  it.effect("answers the same request with the same events", () =>
    Effect.gen(function*() {
      const first = yield* runEvents(ask(prompt))
      const second = yield* runEvents(ask(prompt))
      assert.deepStrictEqual(second.events, first.events)
    }))

  it.effect("answers differently when the prompt, temperature or placement seed differ", () =>
    Effect.gen(function*() {
      const base = textOf((yield* runEvents(ask(prompt))).response)
      const otherPrompt = textOf((yield* runEvents(ask("Tell me something about gardens."))).response)
      const otherTemperature = textOf((yield* runEvents(ask(prompt, { temperature: 0.7 }))).response)
      const seeded = simulatorPlacement({ modelId: "svc-sim-plain", simulator: { seed: 42 } })
      const otherSeed = textOf((yield* runEvents(ask(prompt), seeded)).response)
      assert.notStrictEqual(otherPrompt, base)
      assert.notStrictEqual(otherTemperature, base)
      assert.notStrictEqual(otherSeed, base)
    }))

  it.effect("writes 20 to 120 tokens of vocabulary prose in sentences that contain ' the '", () =>
    Effect.gen(function*() {
      const lengths = new Set<number>()
      for (let i = 0; i < 25; i++) {
        const { response } = yield* runEvents(ask(`Question number ${i}?`))
        const text = textOf(response)
        assert.strictEqual(response.stopReason, "end_turn")
        assert.strictEqual(response.usage.outputTokens, countTextTokens(text))
        assert.isAtLeast(response.usage.outputTokens, 20)
        assert.isAtMost(response.usage.outputTokens, 140) // 120 plus the rest of the last sentence
        for (const sentence of text.split(/(?<=\.) /)) {
          assert.match(sentence, /^[A-Z].* the .*\.$/)
        }
        const words = text.toLowerCase().match(/[a-z]+/g) ?? []
        assert.isTrue(words.every((word) => SIMULATOR_VOCABULARY.includes(word)), text)
        lengths.add(response.usage.outputTokens)
      }
      assert.isAbove(lengths.size, 10)
    }))

  it.effect("reports input tokens as counted by the tokenizer", () =>
    Effect.gen(function*() {
      const request = ask(prompt, { system: [{ type: "text", text: "Be brief." }] })
      const { response, events } = yield* runEvents(request)
      assert.strictEqual(response.usage.inputTokens, yield* countRequestTokens(request))
      const start = events[0]
      assert.strictEqual(start.type === "message_start" ? start.usage?.inputTokens : -1, yield* countRequestTokens(request))
    }))

  it.effect("streams text in deltas of a few tokens", () =>
    Effect.gen(function*() {
      const { events } = yield* runEvents(ask(prompt))
      const deltas = events.filter((e) => e.type === "text_delta")
      assert.isAbove(deltas.length, 5)
      for (const delta of deltas.slice(0, -1)) assert.isAtMost(countTextTokens(delta.type === "text_delta" ? delta.text : ""), 4)
    }))
})

describe("output ceiling", () => {
  for (const ceiling of [1, 5, 17]) {
    it.effect(`stops at exactly ${ceiling} tokens with max_tokens, emitting a prefix of the full answer`, () =>
      Effect.gen(function*() {
        const full = textOf((yield* runEvents(ask(prompt))).response)
        const { response } = yield* runEvents(ask(prompt, { maxOutputTokens: ceiling }))
        assert.strictEqual(response.stopReason, "max_tokens")
        assert.strictEqual(response.usage.outputTokens, ceiling)
        const text = textOf(response)
        assert.isTrue(full.startsWith(text) && text.length > 0 && text.length < full.length, text)
        assert.strictEqual(countTextTokens(text), ceiling)
      }))
  }

  it.effect("ends the turn normally when the ceiling is exactly the answer's length", () =>
    Effect.gen(function*() {
      const full = yield* runEvents(ask(prompt))
      const { response } = yield* runEvents(ask(prompt, { maxOutputTokens: full.response.usage.outputTokens }))
      assert.strictEqual(response.stopReason, "end_turn")
      assert.strictEqual(textOf(response), textOf(full.response))
    }))
})

describe("say exactly", () => {
  it.effect("echoes the text after 'say exactly:' verbatim", () =>
    Effect.gen(function*() {
      const { response } = yield* runEvents(ask("Please Say Exactly:   Hello, wörld! 🎉 42"))
      assert.strictEqual(textOf(response), "Hello, wörld! 🎉 42")
      assert.strictEqual(response.stopReason, "end_turn")
      assert.strictEqual(response.usage.outputTokens, countTextTokens("Hello, wörld! 🎉 42"))
    }))

  it.effect("still honors the ceiling", () =>
    Effect.gen(function*() {
      const { response } = yield* runEvents(ask("say exactly: one two three four five six", { maxOutputTokens: 3 }))
      assert.strictEqual(textOf(response), "one two three")
      assert.strictEqual(response.stopReason, "max_tokens")
    }))
})

describe("stop sequences", () => {
  it.effect("cuts before the first occurrence and names the sequence", () =>
    Effect.gen(function*() {
      const full = textOf((yield* runEvents(ask(prompt))).response)
      const { response } = yield* runEvents(ask(prompt, { stopSequences: ["."] }))
      assert.strictEqual(response.stopReason, "stop_sequence")
      assert.strictEqual(response.stopSequence, ".")
      assert.strictEqual(textOf(response), full.slice(0, full.indexOf(".")))
      assert.strictEqual(response.usage.outputTokens, countTextTokens(textOf(response)))
    }))

  it.effect("reports the sequence that occurs first", () =>
    Effect.gen(function*() {
      const { response } = yield* runEvents(ask("say exactly: alpha beta STOP gamma END delta", { stopSequences: ["END", "STOP", "absent"] }))
      assert.strictEqual(textOf(response), "alpha beta ")
      assert.strictEqual(response.stopSequence, "STOP")
    }))

  it.effect("every prose answer stops at ' the '", () =>
    Effect.gen(function*() {
      const { response } = yield* runEvents(ask(prompt, { stopSequences: [" the "] }))
      assert.strictEqual(response.stopReason, "stop_sequence")
      assert.notInclude(textOf(response), " the ")
    }))

  it.effect("ends the turn when no sequence occurs", () =>
    Effect.gen(function*() {
      const { response } = yield* runEvents(ask("say exactly: nothing to see", { stopSequences: ["zebra"] }))
      assert.strictEqual(response.stopReason, "end_turn")
      assert.isUndefined(response.stopSequence)
    }))

  it.effect("the ceiling wins when it comes before the stop sequence", () =>
    Effect.gen(function*() {
      const { response } = yield* runEvents(ask("say exactly: one two three four STOP", { stopSequences: ["STOP"], maxOutputTokens: 2 }))
      assert.strictEqual(response.stopReason, "max_tokens")
      assert.strictEqual(textOf(response), "one two")
    }))
})

describe("reasoning", () => {
  const think = (visible: boolean, maxOutputTokens?: number) =>
    ask(prompt, { model: "svc-sim-reasoner", reasoning: { enabled: true, visible }, ...(maxOutputTokens === undefined ? {} : { maxOutputTokens }) })

  it.effect("visible reasoning comes first as a signed thinking block", () =>
    Effect.gen(function*() {
      const { response } = yield* runEvents(think(true), reasoningModel)
      const [thinking, text] = response.content
      assert.strictEqual(thinking.type, "thinking")
      if (thinking.type !== "thinking") return
      assert.isAbove(thinking.signature.length, 10)
      assert.strictEqual(response.usage.reasoningTokens, countTextTokens(thinking.thinking))
      assert.strictEqual(text.type, "text")
      assert.strictEqual(response.usage.outputTokens, response.usage.reasoningTokens + countTextTokens(textOf(response)))
    }))

  it.effect("hidden reasoning shows no block but counts as output, and the answer is the same", () =>
    Effect.gen(function*() {
      const visible = (yield* runEvents(think(true), reasoningModel)).response
      const { response } = yield* runEvents(think(false), reasoningModel)
      assert.deepStrictEqual(response.content.map((b) => b.type), ["text"])
      assert.strictEqual(response.usage.reasoningTokens, visible.usage.reasoningTokens)
      assert.isAbove(response.usage.reasoningTokens, 0)
      assert.strictEqual(response.usage.outputTokens, response.usage.reasoningTokens + countTextTokens(textOf(response)))
      assert.strictEqual(textOf(response), textOf(visible))
    }))

  it.effect("a tiny ceiling is consumed by hidden reasoning, leaving empty text", () =>
    Effect.gen(function*() {
      const { response } = yield* runEvents(think(false, 10), reasoningModel)
      assert.deepStrictEqual(response.content, [])
      assert.strictEqual(response.stopReason, "max_tokens")
      assert.strictEqual(response.usage.outputTokens, 10)
      assert.strictEqual(response.usage.reasoningTokens, 10)
    }))

  it.effect("budgetTokens and effort bound the reasoning", () =>
    Effect.gen(function*() {
      const capped = (yield* runEvents(ask(prompt, { reasoning: { enabled: true, visible: false, budgetTokens: 20 } }), reasoningModel)).response
      assert.strictEqual(capped.usage.reasoningTokens, 20)
      const low = (yield* runEvents(ask(prompt, { reasoning: { enabled: true, visible: false, effort: "low" } }), reasoningModel)).response
      const high = (yield* runEvents(ask(prompt, { reasoning: { enabled: true, visible: false, effort: "high" } }), reasoningModel)).response
      assert.isAbove(high.usage.reasoningTokens, low.usage.reasoningTokens)
    }))

  it.effect("models without the capability do not reason", () =>
    Effect.gen(function*() {
      const { response } = yield* runEvents(think(true))
      assert.strictEqual(response.usage.reasoningTokens, 0)
      assert.deepStrictEqual(response.content.map((b) => b.type), ["text"])
    }))
})
