import { describe, expect, it } from "vitest"
import type { Pricing } from "../../src/model/money.ts"
import { costMicros, costPicos, formatUsd, maxCostMicros, microsToUsd, usdToMicros } from "../../src/model/money.ts"
import { makeUsage } from "../../src/model/usage.ts"

const sonnetLike: Pricing = { input: 3, output: 15, cachedInput: 0.3 }
const noCacheRate: Pricing = { input: 3, output: 15, cachedInput: null }

describe("costMicros", () => {
  it("charges input and output at their rates per million tokens", () => {
    expect(costMicros(makeUsage({ inputTokens: 1_000_000 }), sonnetLike)).toBe(3_000_000)
    expect(costMicros(makeUsage({ outputTokens: 2_000 }), sonnetLike)).toBe(30_000)
    expect(costMicros(makeUsage({ inputTokens: 1_000, outputTokens: 500 }), sonnetLike)).toBe(3_000 + 7_500)
  })

  it("charges cached input at the cached rate when one is published", () => {
    const usage = makeUsage({ inputTokens: 1_000_000, cachedInputTokens: 400_000 })
    // 600k × $3 + 400k × $0.30 = $1.80 + $0.12
    expect(costMicros(usage, sonnetLike)).toBe(1_920_000)
  })

  it("charges cached input at the full input rate when the cached rate is null", () => {
    const usage = makeUsage({ inputTokens: 1_000_000, cachedInputTokens: 400_000 })
    expect(costMicros(usage, noCacheRate)).toBe(3_000_000)
    expect(costMicros(usage, noCacheRate)).toBe(costMicros(makeUsage({ inputTokens: 1_000_000 }), noCacheRate))
  })

  it("does not charge reasoning tokens twice (they are part of output tokens)", () => {
    const withReasoning = makeUsage({ outputTokens: 1_000, reasoningTokens: 800 })
    expect(costMicros(withReasoning, sonnetLike)).toBe(costMicros(makeUsage({ outputTokens: 1_000 }), sonnetLike))
  })

  it("clamps cached tokens to the input tokens", () => {
    const usage = makeUsage({ inputTokens: 100, cachedInputTokens: 500 })
    expect(costPicos(usage, sonnetLike)).toBe(100n * 300_000n)
  })

  it("is exact where floating point drifts", () => {
    // 3 × 0.1 is 0.30000000000000004 in floats; in picos it is exactly 300,000.
    expect(costPicos(makeUsage({ inputTokens: 3 }), { input: 0.1, output: 0, cachedInput: null })).toBe(300_000n)
    // A sub-micro-dollar cost rounds up to one micro-dollar, never down to free.
    expect(costMicros(makeUsage({ inputTokens: 1 }), { input: 0.075, output: 0, cachedInput: null })).toBe(1)
    // 10,000 identical small requests sum exactly to the cost of their total tokens.
    const pricing: Pricing = { input: 0.15, output: 0.6, cachedInput: 0.075 }
    const one = makeUsage({ inputTokens: 1_000_000, outputTokens: 1_000_000, cachedInputTokens: 500_000 })
    let sum = 0
    for (let i = 0; i < 10_000; i++) sum += costMicros(one, pricing)
    expect(sum).toBe(10_000 * 712_500)
  })

  it("never throws for a usage: a count that is not a finite positive number costs nothing", () => {
    // The adapters clean what upstreams report (reportedTokens); this is the last line: a NaN count
    // made BigInt throw, and the answer's settlement failed with it.
    expect(costMicros(makeUsage({ inputTokens: Number.NaN, outputTokens: Number.POSITIVE_INFINITY, cachedInputTokens: -4 }), sonnetLike)).toBe(0)
    expect(costMicros(makeUsage({ inputTokens: 1_000_000.9, outputTokens: -2 }), sonnetLike)).toBe(costMicros(makeUsage({ inputTokens: 1_000_000 }), sonnetLike))
  })

  it("rejects negative or non-finite rates", () => {
    expect(() => costMicros(makeUsage({ inputTokens: 1 }), { input: -1, output: 0, cachedInput: null })).toThrow(RangeError)
    expect(() => costMicros(makeUsage({ inputTokens: 1 }), { input: Number.NaN, output: 0, cachedInput: null })).toThrow(RangeError)
  })
})

describe("maxCostMicros", () => {
  it("assumes no cache discount and the full output ceiling", () => {
    expect(maxCostMicros(10_000, 4_000, sonnetLike)).toBe(30_000 + 60_000)
  })
})

describe("conversions", () => {
  it("converts between dollars and micro-dollars", () => {
    expect(usdToMicros(0.1 + 0.2)).toBe(300_000)
    expect(usdToMicros(5)).toBe(5_000_000)
    expect(microsToUsd(1_920_000)).toBe(1.92)
  })

  it("formats micro-dollars with six decimals from integers", () => {
    expect(formatUsd(1_234_567)).toBe("1.234567")
    expect(formatUsd(5)).toBe("0.000005")
    expect(formatUsd(0)).toBe("0.000000")
    expect(formatUsd(-2_500_000)).toBe("-2.500000")
  })
})
