/**
 * What a call costs, from the same list rates the catalog shows (`pricing_usd_per_mtok`), in
 * integer micro-dollars (see model/money.ts for the rounding: up, to the micro-dollar).
 */
import type { ChatModel } from "../config/schema.ts"
import { costMicros, maxCostMicros, type Micros } from "../model/money.ts"
import type { Usage } from "../model/usage.ts"

type Priced = Pick<ChatModel, "pricing">
type Limited = Pick<ChatModel, "maxOutput" | "contextWindow">

/**
 * Output ceiling reserved when neither the request nor the model names one. The request path must
 * send the ceiling it reserved upstream as the output limit, so usage can never outgrow the hold.
 */
export const DEFAULT_OUTPUT_CEILING = 4_096

/** The cost of a finished call: input at `input` (cached input at `cachedInput` when published), output at `output`. */
export const callCostMicros = (usage: Usage, model: Priced): Micros => costMicros(usage, model.pricing)

/**
 * The output tokens a call may produce: the request's own limit, else the model's `maxOutput`, else
 * `DEFAULT_OUTPUT_CEILING`; never above the model's `maxOutput` nor what is left of the context.
 */
export const outputCeiling = (model: Limited, inputTokens: number, requested?: number | undefined): number => {
  const contextLeft = Math.max(1, model.contextWindow - Math.max(0, inputTokens))
  const wanted = requested ?? model.maxOutput ?? DEFAULT_OUTPUT_CEILING
  return Math.max(1, Math.min(Math.trunc(wanted), model.maxOutput ?? Infinity, contextLeft))
}

/** The most a call can cost: every input token uncached, plus the whole output ceiling. */
export const worstCaseMicros = (model: Priced, inputTokens: number, maxOutputTokens: number): Micros =>
  maxCostMicros(inputTokens, maxOutputTokens, model.pricing)

/** The most a call can cost when any of `models` may serve it (continuity): the dearest of them. */
export const worstCaseOverMicros = (models: ReadonlyArray<Priced>, inputTokens: number, maxOutputTokens: number): Micros =>
  Math.max(...models.map((model) => worstCaseMicros(model, inputTokens, maxOutputTokens)))
