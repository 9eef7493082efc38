/**
 * What a run does when something fails under it: retry the step later, or end the run — and the
 * error it shows, typed with the spec's error types (Errors section), never an internal tag.
 *
 * Retryable, as the spec's retry rules and an outage call for: a 429 `rate_limit_error` of the
 * key's own plan, every 5xx (`ServiceUnavailable` — e.g. the allowance store down —, a model that
 * failed after the dispatcher's own retries and failovers, a queue timeout) and a storage outage
 * (`SqlError`, except the kinds that mean a bug: syntax and constraint errors).
 * Not retryable: the spent allowance or credits, a request the model refuses (4xx), a model with
 * no placement left, a stored request that no longer fits its model (the config changed), bugs.
 *
 * Retry schedule (`retryDelayMs`): a rate limit waits exactly its `retry-after`; anything else
 * backs off exponentially from `baseMs` (1, 2, 4, 8, 16, 32 s by default), at most one minute per
 * wait, each wait scaled by a random factor in 0.8–1.2 (then capped).
 */
/** The `error` of a run's `node.retry` and `outcome` events. */
interface RunError {
  /** A spec error type: `api_error`, `rate_limit_error`, `allowance_exhausted`, `credits_exhausted`, `invalid_request_error`, `not_found`, `not_implemented`. */
  readonly type: string
  readonly message: string
}

/** How a failure ends the run when it is not retried (or the retries ran out). */
type StepFailureReason = "model_error" | "execution_error"

export interface Classified {
  readonly retryable: boolean
  readonly reason: StepFailureReason
  readonly error: RunError
  /** A rate limit's exact wait. */
  readonly retryAfterMs?: number | undefined
}

export const MAX_RETRY_DELAY_MS = 60_000

const NOT_RETRYABLE_SQL = new Set(["SqlSyntaxError", "ConstraintError", "UniqueViolation"])

const messageOf = (error: unknown) =>
  typeof error === "object" && error !== null && typeof (error as { message?: unknown }).message === "string" && (error as { message: string }).message !== ""
    ? (error as { message: string }).message
    : String(error)

/** Classifies a failure of a run's step or round (a typed error, or anything else: a bug). */
export const classify = (failure: unknown): Classified => {
  const error = failure as { readonly _tag?: string; readonly [field: string]: any }
  const model = (type: string, retryable: boolean, retryAfterMs?: number): Classified => ({
    retryable,
    reason: "model_error",
    error: { type, message: messageOf(failure) },
    ...(retryAfterMs === undefined ? {} : { retryAfterMs })
  })
  switch (error?._tag) {
    case "BackendError":
      // Upstream 4xx: the model refuses this request; anything else failed after the dispatcher's
      // own retries (an upstream 429 is not this key's limit: it is an `api_error`, as on chat).
      return error.type === "invalid_request_error" ? model("invalid_request_error", false) : model("api_error", error.retryable === true)
    case "QueueTimeout":
    case "ServiceUnavailable":
      return model("api_error", true)
    case "LimitExceeded":
      return error.kind === "rate_limit_error"
        ? model("rate_limit_error", true, typeof error.retryAfterSeconds === "number" ? error.retryAfterSeconds * 1_000 : undefined)
        : model(error.kind, false)
    case "NotImplemented":
      return model("not_implemented", false)
    case "InvalidRequest":
    case "Unprocessable":
      return { retryable: false, reason: "execution_error", error: { type: "invalid_request_error", message: messageOf(failure) } }
    case "SqlError":
      return {
        retryable: !NOT_RETRYABLE_SQL.has(error.reason?._tag),
        reason: "execution_error",
        error: { type: "api_error", message: `Storage is unavailable: ${messageOf(failure)}` }
      }
    default:
      return { retryable: false, reason: "execution_error", error: { type: "api_error", message: messageOf(failure) } }
  }
}

/** Milliseconds to wait before retry number `retry` (1-based). `random` returns a number in [0, 1). */
export const retryDelayMs = (retry: number, failure: Classified, baseMs: number, random: () => number = Math.random): number =>
  failure.retryAfterMs ?? Math.round(Math.min(baseMs * 2 ** (retry - 1) * (0.8 + 0.4 * random()), MAX_RETRY_DELAY_MS))
