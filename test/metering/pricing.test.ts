/** Prices come from the catalog's own list rates (the built-in config users see at /v1/models). */
import { describe, expect, it } from "vitest"
import { defaultConfig } from "../../src/config/default-config.ts"
import { callCostMicros, DEFAULT_OUTPUT_CEILING, outputCeiling, worstCaseMicros } from "../../src/metering/pricing.ts"
import { makeUsage } from "../../src/model/usage.ts"

const model = (id: string) => {
  const found = defaultConfig.models.find((m) => m.id === id)
  if (found === undefined) throw new Error(`no ${id} in the default catalog`)
  return found
}
const atlas = model("svc-atlas-1") // $3 in, $15 out, $0.30 cached, maxOutput 32,000
const vega = model("svc-vega-2") // $1.10 in, $4.40 out, no cached rate
const pico = model("svc-pico-1") // maxOutput null, context 32,000

describe("callCostMicros", () => {
  it("charges cached input at the catalog's cached rate when one is published", () => {
    const usage = makeUsage({ inputTokens: 10_000, cachedInputTokens: 8_000, outputTokens: 1_000 })
    // 2,000 × $3 + 8,000 × $0.30 + 1,000 × $15, per million
    expect(callCostMicros(usage, atlas)).toBe(6_000 + 2_400 + 15_000)
  })

  it("charges cached input at the full input rate when the catalog has none", () => {
    const usage = makeUsage({ inputTokens: 10_000, cachedInputTokens: 8_000, outputTokens: 1_000 })
    expect(callCostMicros(usage, vega)).toBe(11_000 + 4_400)
  })
})

describe("outputCeiling and the worst case", () => {
  it("uses the request's limit, capped by the model's maxOutput and the context left", () => {
    expect(outputCeiling(atlas, 1_000, 500)).toBe(500)
    expect(outputCeiling(atlas, 1_000, 1_000_000)).toBe(32_000)
    expect(outputCeiling(atlas, 190_000, 32_000)).toBe(10_000)
    expect(outputCeiling(pico, 1_000, 50_000)).toBe(31_000)
  })

  it("defaults to the model's maxOutput, else to DEFAULT_OUTPUT_CEILING", () => {
    expect(outputCeiling(atlas, 1_000, undefined)).toBe(32_000)
    expect(outputCeiling(pico, 1_000, undefined)).toBe(DEFAULT_OUTPUT_CEILING)
    expect(outputCeiling(pico, 31_000, undefined)).toBe(1_000)
  })

  it("reserves every input token uncached plus the whole ceiling at list price", () => {
    expect(worstCaseMicros(atlas, 10_000, 1_000)).toBe(30_000 + 15_000)
    const cached = callCostMicros(makeUsage({ inputTokens: 10_000, cachedInputTokens: 10_000, outputTokens: 1_000 }), atlas)
    expect(cached).toBeLessThan(worstCaseMicros(atlas, 10_000, 1_000))
  })
})
