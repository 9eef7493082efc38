/**
 * One request's path through its candidate placements, as a pure transition function: the state
 * is plain data, `stepDispatch(state, event)` returns the next state. The host
 * (src/runtime/dispatcher.ts) does the waiting, calling and sleeping, reports each fact as an
 * event and reads what to do next from the state. No timers: the retry delay is computed by the
 * host (`nextDelay` in src/runtime/retry-policy.ts, which needs randomness for jitter) and
 * reported with `RETRY_DUE`.
 *
 * Why not an XState actor: one is created per request, and measured at ≈37 µs for a plain
 * request (`xstate`'s pure `transition()` at ≈94 µs) against well under 1 µs here. `dispatchLogic`
 * wraps the same function as XState transition logic, so `xstate/graph` still walks every path in
 * the model-based tests.
 *
 * States (`state.value`)
 * - `waiting`   for a slot on any eligible candidate (`eligibleCandidates`: the candidates not yet
 *               tried in this round, in preference order; after a text break only those that can
 *               resume). `GRANTED` → `calling`; `QUEUE_TIMEOUT` → `failed`. `CIRCUITS` reports
 *               which eligible placements have an open circuit: when the request has already
 *               failed and every eligible one is open, waiting for a half-open probe (up to the
 *               cooldown) would only delay the same answer → `failed`.
 * - `calling`   an attempt is running and nothing of it reached the client yet.
 *               `FIRST_BYTE` → `streaming`; `SUCCEEDED` → `done` (a non-streamed answer).
 *               `FAILED` follows the spec's retry rules: not retryable, or `maxAttempts` (5)
 *               attempts made → `failed` at once; another candidate untried in this round →
 *               `waiting` (failover, no delay); an upstream that asks to be left alone longer
 *               than `MAX_HONORED_RETRY_AFTER_SECONDS` → `failed` (the client gets its
 *               `retry-after`); otherwise → `retryWait` (back off, then try all).
 * - `retryWait` backing off; `RETRY_DUE` → `waiting` with a fresh round.
 * - `streaming` events are reaching the client, so a failure can no longer be hidden.
 *               `SUCCEEDED` → `done`. `FAILED` (a break inside a tool call or a thinking block)
 *               → `failed`. `CONTINUE_TEXT` (the break came in plain text) → `waiting` on another
 *               untried candidate that can resume from a prefix, or `failed` when none is left,
 *               the error is not retryable, or the five attempts are spent. Once
 *               `firstByteSent`, it stays true: the continuation's own attempts retry and fail
 *               over like before, since none of their output has been sent yet.
 * - `done`, `failed` are final; `dispatchOutput` says who served and what went wrong.
 */
import { fromTransition } from "xstate"

/** What the rules know of a candidate (the runtime's `DispatchCandidate` adds how to call it). */
export interface CandidateFacts {
  readonly placementId: string
  readonly modelId: string
  /** Can continue a broken text answer from the text already sent (an assistant prefix). */
  readonly canResume?: boolean | undefined
}

/** What the rules need to know about a failed attempt (BackendError satisfies it). */
export interface AttemptError {
  readonly status: number
  readonly retryable: boolean
  readonly retryAfterSeconds?: number | undefined
}

export interface DispatchInput {
  readonly candidates: ReadonlyArray<CandidateFacts>
  readonly maxAttempts?: number
}

/** The spec's cap: at most five attempts in total, across retries and failovers. */
export const MAX_ATTEMPTS = 5

/**
 * The longest `retry-after` the gateway waits out itself (seconds). An upstream may ask for
 * minutes or days (a quota window); holding the client's request that long helps no one, so a
 * longer wait ends the request with the upstream's `retry-after` passed on — as the official
 * SDKs ignore a `retry-after` of a minute or more.
 */
export const MAX_HONORED_RETRY_AFTER_SECONDS = 60

type DispatchFailure = "error" | "queue_timeout" | "no_candidates"
type DispatchPhase = "waiting" | "calling" | "retryWait" | "streaming" | "done" | "failed"

export interface DispatchContext {
  readonly candidates: ReadonlyArray<CandidateFacts>
  readonly maxAttempts: number
  readonly attempts: number
  /** The placement of the attempt in progress (or the last one). */
  readonly current: string | null
  /** Placements that failed in this round; they are not eligible until the next round. */
  readonly tried: ReadonlyArray<string>
  readonly firstByteSent: boolean
  /** After a text break: only candidates that can resume are eligible. */
  readonly continuing: boolean
  readonly continuations: number
  readonly lastError: AttemptError | null
  readonly failure: DispatchFailure | null
}

export interface DispatchState {
  readonly value: DispatchPhase
  readonly context: DispatchContext
}

export type DispatchEvent =
  | { readonly type: "GRANTED"; readonly placementId: string }
  | { readonly type: "FIRST_BYTE" }
  | { readonly type: "SUCCEEDED" }
  | { readonly type: "FAILED"; readonly error: AttemptError }
  | { readonly type: "CONTINUE_TEXT"; readonly error: AttemptError }
  | { readonly type: "RETRY_DUE" }
  | { readonly type: "QUEUE_TIMEOUT" }
  | { readonly type: "CIRCUITS"; readonly open: ReadonlyArray<string> }

export interface DispatchOutput {
  readonly servedBy: string | null
  readonly attempts: number
  readonly failure: DispatchFailure | null
  readonly error: AttemptError | null
}

const untried = (context: DispatchContext) =>
  context.candidates.filter((candidate) =>
    !context.tried.includes(candidate.placementId) && (!context.continuing || candidate.canResume === true)
  )

/** Eligible candidates other than the current one (after it is marked tried). */
const alternatives = (context: DispatchContext) =>
  untried(context).filter((candidate) => candidate.placementId !== context.current)

const to = (value: DispatchPhase, context: DispatchContext): DispatchState => ({ value, context })

const fail = (context: DispatchContext, reason: DispatchFailure): DispatchState => to("failed", { ...context, failure: reason })

/** The failed attempt's placement is tried for this round; its error is the last one. */
const recordFailure = (context: DispatchContext, error: AttemptError): DispatchContext => ({
  ...context,
  lastError: error,
  tried: context.current === null || context.tried.includes(context.current) ? context.tried : [...context.tried, context.current]
})

const cannotRetry = (context: DispatchContext, error: AttemptError) => !error.retryable || context.attempts >= context.maxAttempts

/** Whether the upstream asked for a wait longer than the gateway waits out (a 429's `retry-after`). */
export const asksTooLongAWait = (error: AttemptError) =>
  error.status === 429 && error.retryAfterSeconds !== undefined && error.retryAfterSeconds > MAX_HONORED_RETRY_AFTER_SECONDS

export const startDispatch = (input: DispatchInput): DispatchState => {
  const context: DispatchContext = {
    candidates: input.candidates,
    maxAttempts: input.maxAttempts ?? MAX_ATTEMPTS,
    attempts: 0,
    current: null,
    tried: [],
    firstByteSent: false,
    continuing: false,
    continuations: 0,
    lastError: null,
    failure: null
  }
  return context.candidates.length === 0 ? fail(context, "no_candidates") : to("waiting", context)
}

/** The next state; an event the current state does not take leaves it unchanged. */
export const stepDispatch = (state: DispatchState, event: DispatchEvent): DispatchState => {
  const { context } = state
  switch (state.value) {
    case "waiting":
      switch (event.type) {
        case "GRANTED":
          return untried(context).some((c) => c.placementId === event.placementId)
            ? to("calling", { ...context, attempts: context.attempts + 1, current: event.placementId })
            : state
        case "QUEUE_TIMEOUT":
          return fail(context, "queue_timeout")
        case "CIRCUITS": {
          const eligible = untried(context)
          return context.lastError !== null && eligible.length > 0 && eligible.every((c) => event.open.includes(c.placementId))
            ? fail(context, "error")
            : state
        }
        default:
          return state
      }
    case "calling":
      switch (event.type) {
        case "FIRST_BYTE":
          return to("streaming", { ...context, firstByteSent: true })
        case "SUCCEEDED":
          return to("done", context)
        case "FAILED": {
          const failed = recordFailure(context, event.error)
          if (cannotRetry(context, event.error)) return fail(failed, "error")
          if (alternatives(context).length > 0) return to("waiting", failed)
          return asksTooLongAWait(event.error) ? fail(failed, "error") : to("retryWait", failed)
        }
        default:
          return state
      }
    case "retryWait":
      return event.type === "RETRY_DUE" ? to("waiting", { ...context, tried: [] }) : state
    case "streaming":
      switch (event.type) {
        case "SUCCEEDED":
          return to("done", context)
        case "FAILED":
          return fail(recordFailure(context, event.error), "error")
        case "CONTINUE_TEXT": {
          const resuming: DispatchContext = { ...context, continuing: true }
          const failed = recordFailure(resuming, event.error)
          if (cannotRetry(context, event.error) || alternatives(resuming).length === 0) return fail(failed, "error")
          return to("waiting", { ...failed, continuations: context.continuations + 1 })
        }
        default:
          return state
      }
    case "done":
    case "failed":
      return state
  }
}

const isFinal = (state: DispatchState) => state.value === "done" || state.value === "failed"

/** Who served and what went wrong, once final. */
export const dispatchOutput = (state: DispatchState): DispatchOutput | undefined =>
  isFinal(state)
    ? { servedBy: state.context.current, attempts: state.context.attempts, failure: state.context.failure, error: state.context.lastError }
    : undefined

/** Where the next attempt may run: untried (and, continuing, resumable) candidates in preference order. */
export const eligibleCandidates = (state: DispatchState): ReadonlyArray<CandidateFacts> => untried(state.context)

/** The same rules as XState transition logic, for `xstate/graph` (model-based tests). */
export const dispatchLogic = fromTransition(stepDispatch, ({ input }: { input: DispatchInput }) => startDispatch(input))
