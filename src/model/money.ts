/**
 * Price arithmetic in integers, so that summing thousands of requests never drifts.
 *
 * Amounts are `Micros`: integer micro-dollars (1 USD = 1,000,000). Internally a cost is computed
 * exactly in pico-dollars with BigInt: a rate of R USD per million tokens is R × 10⁶ pico-dollars
 * per token, exact for rates with up to six decimals (list prices have at most four). The exact
 * cost is then rounded UP to a whole micro-dollar, so a request is never charged less than its
 * list price and never more than $0.000001 above it.
 */
import type { Usage } from "./usage.ts"
import { uncachedInputTokens } from "./usage.ts"

/** List rates in USD per million tokens. `cachedInput: null`: cached tokens pay the input rate. */
export interface Pricing {
  readonly input: number
  readonly output: number
  readonly cachedInput: number | null
}

/** Integer micro-dollars. */
export type Micros = number

const MICROS_PER_USD = 1_000_000

const PICOS_PER_MICRO = 1_000_000n

/** Pico-dollars per token for a rate in USD per million tokens (exact up to six decimals). */
const picosPerToken = (usdPerMillionTokens: number): bigint => {
  if (!Number.isFinite(usdPerMillionTokens) || usdPerMillionTokens < 0) {
    throw new RangeError(`a price must be a finite non-negative number, got ${usdPerMillionTokens}`)
  }
  return BigInt(Math.round(usdPerMillionTokens * 1e6))
}

/** A count as a whole number of tokens; what is not a finite positive number (a broken upstream's figure) is none. */
const tokens = (n: number): bigint => (Number.isFinite(n) && n > 0 ? BigInt(Math.trunc(n)) : 0n)

const ceilToMicros = (picos: bigint): Micros => Number((picos + PICOS_PER_MICRO - 1n) / PICOS_PER_MICRO)

/** The exact cost of a usage in pico-dollars (10⁻¹² USD). */
export const costPicos = (usage: Usage, pricing: Pricing): bigint => {
  const cached = Math.min(Math.max(0, usage.cachedInputTokens), usage.inputTokens)
  const uncached = uncachedInputTokens({ ...usage, cachedInputTokens: cached })
  const cachedRate = pricing.cachedInput ?? pricing.input
  return tokens(uncached) * picosPerToken(pricing.input) +
    tokens(cached) * picosPerToken(cachedRate) +
    tokens(usage.outputTokens) * picosPerToken(pricing.output)
}

/** What a usage costs at list price, in micro-dollars rounded up. */
export const costMicros = (usage: Usage, pricing: Pricing): Micros => ceilToMicros(costPicos(usage, pricing))

/**
 * The most a call can cost before it runs: every input token at the full rate (no cache discount
 * is assumed) plus the whole output ceiling. Used to reserve allowance up front.
 */
export const maxCostMicros = (inputTokens: number, maxOutputTokens: number, pricing: Pricing): Micros =>
  costMicros({ inputTokens, outputTokens: maxOutputTokens, cachedInputTokens: 0, reasoningTokens: 0 }, pricing)

/**
 * The largest amount a client may name (a run's `budgetUsd`, a credit grant): $1 billion is 10¹⁵
 * micro-dollars, still an exact integer in a JS number (< 2⁵³) and far inside SQL's bigint.
 */
export const MAX_USD_AMOUNT = 1_000_000_000

/** Dollars to micro-dollars, rounded to the nearest micro-dollar (for config values like 5.00). */
export const usdToMicros = (usd: number): Micros => Math.round(usd * MICROS_PER_USD)

/** Micro-dollars to dollars, for display and JSON (exact for any amount below $9 billion). */
export const microsToUsd = (micros: Micros): number => micros / MICROS_PER_USD

/** `1234567` → `"1.234567"`: fixed six decimals, formatted from integers (no float rounding). */
export const formatUsd = (micros: Micros): string => {
  const sign = micros < 0 ? "-" : ""
  const abs = Math.abs(Math.trunc(micros))
  const whole = Math.floor(abs / MICROS_PER_USD)
  const fraction = String(abs % MICROS_PER_USD).padStart(6, "0")
  return `${sign}${whole}.${fraction}`
}
