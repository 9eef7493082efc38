/**
 * Token usage of one model call.
 *
 * Conventions (OpenAI's, because they nest cleanly; the Messages encoder splits them):
 * - `inputTokens` counts every prompt token, cached ones included; `cachedInputTokens` is the part
 *   of it read from a prompt cache (Messages `cache_read_input_tokens`; its `input_tokens` is
 *   `inputTokens - cachedInputTokens`).
 * - `outputTokens` counts every generated token, reasoning included; `reasoningTokens` is the part
 *   of it spent on reasoning, visible or hidden.
 */
export interface Usage {
  readonly inputTokens: number
  readonly outputTokens: number
  readonly cachedInputTokens: number
  readonly reasoningTokens: number
}

export const emptyUsage: Usage = { inputTokens: 0, outputTokens: 0, cachedInputTokens: 0, reasoningTokens: 0 }

export const makeUsage = (fields: Partial<Usage>): Usage => ({ ...emptyUsage, ...fields })

/**
 * Most tokens one count of one call may report: more than any model reads or writes in a call. A
 * larger figure is an upstream's error, and a ledger row must stay a whole number its `bigint`
 * column (and every sum of them) can hold.
 */
export const MAX_REPORTED_TOKENS = 1_000_000_000

/**
 * A token count as an upstream reported it, made one the gateway can charge and store: a whole
 * number from 0 to `MAX_REPORTED_TOKENS`. What is not a positive number (absent, null, a string,
 * an object, NaN, negative) counts 0: a broken upstream never fails the answer's settlement,
 * never credits a key, and never writes a row the ledger cannot hold.
 */
export const reportedTokens = (value: unknown): number =>
  typeof value === "number" && value > 0 ? Math.min(Math.trunc(value), MAX_REPORTED_TOKENS) : 0

export const addUsage = (a: Usage, b: Usage): Usage => ({
  inputTokens: a.inputTokens + b.inputTokens,
  outputTokens: a.outputTokens + b.outputTokens,
  cachedInputTokens: a.cachedInputTokens + b.cachedInputTokens,
  reasoningTokens: a.reasoningTokens + b.reasoningTokens
})

export const totalTokens = (usage: Usage): number => usage.inputTokens + usage.outputTokens

/** Prompt tokens billed at the full input rate. */
export const uncachedInputTokens = (usage: Usage): number =>
  Math.max(0, usage.inputTokens - usage.cachedInputTokens)
