import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { cosineSimilarity, hashingEmbedding } from "../../src/backends/simulator/embeddings.ts"
import { makeSimulatorBackend, simulatorPlacement } from "../../src/backends/simulator/simulator.ts"
import { countTextTokensExact as countTextTokens } from "../../src/model/bpe.ts"

const norm = (v: ReadonlyArray<number>) => Math.sqrt(v.reduce((sum, x) => sum + x * x, 0))
const placement = simulatorPlacement({ modelId: "svc-embed-sim" })

describe("hashingEmbedding", () => {
  it("returns unit vectors of the requested size, also for empty text", () => {
    for (const dimensions of [384, 1536, 2048]) {
      for (const text of ["The cat sat on the mat.", "", "🎉", "a"]) {
        const vector = hashingEmbedding(text, dimensions)
        assert.strictEqual(vector.length, dimensions)
        assert.closeTo(norm(vector), 1, 1e-9)
      }
    }
  })

  it("is deterministic and case-insensitive", () => {
    assert.deepStrictEqual(hashingEmbedding("Hello World", 384), hashingEmbedding("hello world", 384))
    assert.notDeepEqual(hashingEmbedding("hello world", 384), hashingEmbedding("goodbye world", 384))
  })

  it("ranks related texts above unrelated ones", () => {
    const query = hashingEmbedding("how do I reset my password", 768)
    const related = hashingEmbedding("steps to reset a forgotten password", 768)
    const morphological = hashingEmbedding("password resetting instructions", 768)
    const unrelated = hashingEmbedding("the annual rainfall in the amazon basin", 768)
    const simRelated = cosineSimilarity(query, related)
    const simMorph = cosineSimilarity(query, morphological)
    const simUnrelated = cosineSimilarity(query, unrelated)
    assert.isAbove(simRelated, simUnrelated + 0.2)
    assert.isAbove(simMorph, simUnrelated + 0.1)
    assert.closeTo(cosineSimilarity(query, query), 1, 1e-9)
  })
})

describe("SimulatorBackend.embed", () => {
  it.effect("embeds every text in order and counts input tokens", () =>
    Effect.gen(function*() {
      const backend = makeSimulatorBackend()
      const texts = ["first text", "second, longer text here"]
      const result = yield* backend.embed!({ model: "svc-embed-sim", texts, dimensions: 512 }, placement)
      assert.strictEqual(result.vectors.length, 2)
      assert.deepStrictEqual(result.vectors[1], hashingEmbedding(texts[1], 512))
      assert.strictEqual(result.inputTokens, countTextTokens(texts[0]) + countTextTokens(texts[1]))
    }))

  it.effect("obeys error faults", () =>
    Effect.gen(function*() {
      const broken = simulatorPlacement({ modelId: "svc-embed-sim", faults: { mode: "error", status: 503 } })
      const error = yield* makeSimulatorBackend().embed!({ model: "svc-embed-sim", texts: ["x"], dimensions: 8 }, broken).pipe(Effect.flip)
      assert.strictEqual(error.status, 503)
      assert.strictEqual(error.type, "overloaded_error")
    }))
})
