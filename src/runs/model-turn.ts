/**
 * One model turn of a run, through `ModelCaller` — the only path from a run to a model, so a run
 * waits for capacity, fails over and is metered like any request. This file is the one place that
 * knows ModelCaller's interface.
 *
 * `quote` gives the worst-case cost the run's budget must hold before the turn; the request is sent
 * with that quote's output ceiling, so the real cost can never exceed the hold.
 */
import { Effect, type Scope } from "effect"
import type { BackendError } from "../backends/backend.ts"
import type { KeyRecord } from "../keys/keys-repo.ts"
import { type CanonicalResponse, collectStream } from "../model/events.ts"
import type { Micros } from "../model/money.ts"
import type { CanonicalRequest } from "../model/request.ts"
import type { QueueTimeout } from "../runtime/capacity-queue-types.ts"
import { type Continuity, ModelCaller, type PrepareError, type Settlement } from "../runtime/model-caller.ts"

export type { Continuity }

export interface TurnQuote {
  /** The request as it must be sent: its output ceiling is the quoted one. */
  readonly request: CanonicalRequest
  readonly worstCaseMicros: Micros
  /** The prompt's metered size, counted once for the quote and reused by the call. */
  readonly inputTokens: number
}

export interface Turn {
  readonly servedModel: string
  /** The whole answer; fails when the model fails midway. */
  readonly response: Effect.Effect<CanonicalResponse, BackendError | QueueTimeout>
  /** What the turn was charged; resolves once the answer ended, failed or was abandoned. */
  readonly settled: Effect.Effect<Settlement>
}

export type TurnError = BackendError | QueueTimeout | PrepareError

export const quoteTurn = Effect.fnUntraced(function*(request: CanonicalRequest, continuity: Continuity, key: KeyRecord) {
  const quote = yield* (yield* ModelCaller).quote(request, continuity, key)
  return {
    request: { ...request, maxOutputTokens: quote.maxOutputTokens },
    worstCaseMicros: quote.worstCaseMicros,
    inputTokens: quote.inputTokens
  } satisfies TurnQuote
})

/**
 * Starts the turn (waiting for capacity like any request); resolves at its first event. `requestId`
 * is the meter's id of the call: the same id is recognised as the same call (charged once).
 */
export const startTurn = Effect.fnUntraced(function*(
  quote: TurnQuote,
  options: { readonly key: KeyRecord; readonly continuity: Continuity; readonly requestId: string }
): Effect.fn.Return<Turn, TurnError, ModelCaller | Scope.Scope> {
  const call = yield* (yield* ModelCaller).call(quote.request, {
    key: options.key,
    continuity: options.continuity,
    requestId: options.requestId,
    inputTokens: quote.inputTokens
  })
  return { servedModel: call.servedModel, response: collectStream(call.events), settled: call.settled }
})
