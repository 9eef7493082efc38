/**
 * One request's path through its candidate placements, as a pure XState machine. The host
 * (src/runtime/dispatcher.ts) does the waiting, calling and sleeping, and reports each fact as
 * an event; the machine decides what comes next. No timers: the retry delay is computed by the
 * host (`nextDelay` in src/runtime/retry-policy.ts, which needs randomness for jitter) and
 * reported with `RETRY_DUE`.
 *
 * States
 * - `waiting`   for a slot on any eligible candidate (`eligibleCandidates`: the candidates not
 *               yet tried in this round, in preference order; the host also skips placements whose
 *               circuit is open unless all are). `GRANTED` → `calling`; `QUEUE_TIMEOUT` → `failed`.
 * - `calling`   an attempt is running and nothing of it reached the client yet.
 *               `FIRST_BYTE` → `streaming`. `FAILED` follows the spec's retry rules:
 *               not retryable, or `maxAttempts` (5) attempts made → `failed` at once;
 *               another candidate untried in this round → `waiting` (failover, no delay);
 *               otherwise → `retryWait` (the whole round failed: back off, then try all again).
 * - `retryWait` backing off; `RETRY_DUE` → `waiting` with a fresh round.
 * - `streaming` events are reaching the client, so a failure can no longer be hidden.
 *               `SUCCEEDED` → `done`. `FAILED` (inside a tool call, or no resume hook) → `failed`.
 *               `CONTINUE_TEXT` (the break came in plain text and the host can resume it) →
 *               `waiting` on another untried candidate, or `failed` when none is left, the
 *               error is not retryable, or the five attempts are spent.
 *               Once `firstByteSent`, it stays true: the continuation's own attempts retry and
 *               fail over like before, since none of their output has been sent yet.
 * - `done`, `failed` are final; `output` says who served and what went wrong.
 */
import { assign, setup, type SnapshotFrom } from "xstate"

export interface DispatchCandidate {
  readonly placementId: string
  readonly modelId: string
}

/** What the machine needs to know about a failed attempt (BackendError satisfies it). */
export interface AttemptError {
  readonly status: number
  readonly retryable: boolean
  readonly retryAfterSeconds?: number | undefined
}

export interface DispatchInput {
  readonly candidates: ReadonlyArray<DispatchCandidate>
  readonly maxAttempts?: number
}

/** The spec's cap: at most five attempts in total, across retries and failovers. */
export const MAX_ATTEMPTS = 5

export type FailureReason = "error" | "queue_timeout" | "no_candidates"

export interface DispatchContext {
  readonly candidates: ReadonlyArray<DispatchCandidate>
  readonly maxAttempts: number
  readonly attempts: number
  /** The placement of the attempt in progress (or the last one). */
  readonly current: string | null
  /** Placements that failed in this round; they are not eligible until the next round. */
  readonly tried: ReadonlyArray<string>
  readonly firstByteSent: boolean
  readonly continuations: number
  readonly lastError: AttemptError | null
  readonly failure: FailureReason | null
}

export type DispatchEvent =
  | { readonly type: "GRANTED"; readonly placementId: string }
  | { readonly type: "FIRST_BYTE" }
  | { readonly type: "SUCCEEDED" }
  | { readonly type: "FAILED"; readonly error: AttemptError }
  | { readonly type: "CONTINUE_TEXT"; readonly error: AttemptError }
  | { readonly type: "RETRY_DUE" }
  | { readonly type: "QUEUE_TIMEOUT" }

export interface DispatchOutput {
  readonly servedBy: string | null
  readonly attempts: number
  readonly failure: FailureReason | null
  readonly error: AttemptError | null
}

const untried = (context: DispatchContext) =>
  context.candidates.filter((candidate) => !context.tried.includes(candidate.placementId))

/** Untried candidates other than the current one (after it is marked tried). */
const alternatives = (context: DispatchContext) =>
  untried(context).filter((candidate) => candidate.placementId !== context.current)

const errorOf = (event: DispatchEvent): AttemptError | null =>
  event.type === "FAILED" || event.type === "CONTINUE_TEXT" ? event.error : null

export const dispatchMachine = setup({
  types: {
    context: {} as DispatchContext,
    events: {} as DispatchEvent,
    input: {} as DispatchInput,
    output: {} as DispatchOutput
  },
  guards: {
    noCandidates: ({ context }) => context.candidates.length === 0,
    isEligible: ({ context, event }) =>
      event.type === "GRANTED" && untried(context).some((candidate) => candidate.placementId === event.placementId),
    cannotRetry: ({ context, event }) => {
      const error = errorOf(event)
      return error === null || !error.retryable || context.attempts >= context.maxAttempts
    },
    hasAlternative: ({ context }) => alternatives(context).length > 0,
    canContinue: ({ context, event }) =>
      errorOf(event)?.retryable === true && alternatives(context).length > 0 && context.attempts < context.maxAttempts
  },
  actions: {
    startAttempt: assign(({ context, event }) => ({
      attempts: context.attempts + 1,
      current: event.type === "GRANTED" ? event.placementId : context.current
    })),
    recordFailure: assign(({ context, event }) => ({
      lastError: errorOf(event),
      tried: context.current === null || context.tried.includes(context.current) ? context.tried : [...context.tried, context.current]
    })),
    markFirstByte: assign({ firstByteSent: true }),
    countContinuation: assign(({ context }) => ({ continuations: context.continuations + 1 })),
    newRound: assign({ tried: [] }),
    failWith: assign((_, reason: FailureReason) => ({ failure: reason }))
  }
}).createMachine({
  id: "dispatch",
  context: ({ input }) => ({
    candidates: input.candidates,
    maxAttempts: input.maxAttempts ?? MAX_ATTEMPTS,
    attempts: 0,
    current: null,
    tried: [],
    firstByteSent: false,
    continuations: 0,
    lastError: null,
    failure: null
  }),
  initial: "waiting",
  states: {
    waiting: {
      always: { guard: "noCandidates", target: "failed", actions: { type: "failWith", params: "no_candidates" } },
      on: {
        GRANTED: { guard: "isEligible", target: "calling", actions: "startAttempt" },
        QUEUE_TIMEOUT: { target: "failed", actions: { type: "failWith", params: "queue_timeout" } }
      }
    },
    calling: {
      on: {
        FIRST_BYTE: { target: "streaming", actions: "markFirstByte" },
        SUCCEEDED: { target: "done" },
        FAILED: [
          { guard: "cannotRetry", target: "failed", actions: ["recordFailure", { type: "failWith", params: "error" }] },
          { guard: "hasAlternative", target: "waiting", actions: "recordFailure" },
          { target: "retryWait", actions: "recordFailure" }
        ]
      }
    },
    retryWait: {
      on: { RETRY_DUE: { target: "waiting", actions: "newRound" } }
    },
    streaming: {
      on: {
        SUCCEEDED: { target: "done" },
        FAILED: { target: "failed", actions: ["recordFailure", { type: "failWith", params: "error" }] },
        CONTINUE_TEXT: [
          { guard: "canContinue", target: "waiting", actions: ["recordFailure", "countContinuation"] },
          { target: "failed", actions: ["recordFailure", { type: "failWith", params: "error" }] }
        ]
      }
    },
    done: { type: "final" },
    failed: { type: "final" }
  },
  output: ({ context }) => ({
    servedBy: context.current,
    attempts: context.attempts,
    failure: context.failure,
    error: context.lastError
  })
})

export type DispatchSnapshot = SnapshotFrom<typeof dispatchMachine>
export type DispatchState = "waiting" | "calling" | "retryWait" | "streaming" | "done" | "failed"

/** Where the next attempt may run: untried candidates in preference order. */
export const eligibleCandidates = (snapshot: DispatchSnapshot): ReadonlyArray<DispatchCandidate> => untried(snapshot.context)
