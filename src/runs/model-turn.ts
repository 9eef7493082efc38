/**
 * One model turn of a run, through `ModelCaller` — the only path from a run to a model, so a run
 * waits for capacity, fails over and is metered like any request. This file is the one place that
 * knows ModelCaller's interface.
 *
 * `quote` gives the worst-case cost the run's budget must hold before the turn; the request is sent
 * with that quote's output ceiling, so the real cost can never exceed the hold.
 */
import { Deferred, Effect, Exit, type Scope, Stream } from "effect"
import type { BackendError } from "../backends/backend.ts"
import { Catalog } from "../catalog/catalog.ts"
import type { NotImplemented } from "../errors.ts"
import type { KeyRecord } from "../keys/keys-repo.ts"
import { callCostMicros, outputCeiling, worstCaseMicros } from "../metering/pricing.ts"
import { type CanonicalEvent, type CanonicalResponse, makeResponseBuilder } from "../model/events.ts"
import type { Micros } from "../model/money.ts"
import type { CanonicalRequest } from "../model/request.ts"
import { countRequestInputTokens } from "../model/tokens.ts"
import { emptyUsage, type Usage } from "../model/usage.ts"
import { ModelCaller } from "../runtime/model-caller.ts"

export type Continuity = "auto" | "exact"

export interface TurnQuote {
  /** The request as it must be sent: its output ceiling is the quoted one. */
  readonly request: CanonicalRequest
  readonly worstCaseMicros: Micros
}

export interface TurnSettlement {
  readonly model: string
  readonly usage: Usage
  readonly costMicros: Micros
}

export interface Turn {
  readonly servedModel: string
  /** The whole answer; fails when the model fails midway. */
  readonly response: Effect.Effect<CanonicalResponse, BackendError>
  /** What the turn was charged; resolves once the answer ended, failed or was abandoned. */
  readonly settled: Effect.Effect<TurnSettlement>
}

export type TurnError = BackendError | NotImplemented

export const quoteTurn = (request: CanonicalRequest, _continuity: Continuity) =>
  Effect.gen(function*() {
    const model = (yield* Catalog).chatModel(request.model)
    const inputTokens = countRequestInputTokens(request)
    const maxOutputTokens = model === undefined ? request.maxOutputTokens ?? 1 : outputCeiling(model, inputTokens, request.maxOutputTokens)
    return {
      request: { ...request, maxOutputTokens },
      worstCaseMicros: model === undefined ? 0 : worstCaseMicros(model, inputTokens, maxOutputTokens)
    } satisfies TurnQuote
  })

/**
 * Starts the turn. The answer is folded as it streams, so a turn cut short (cancel, failure) is
 * still settled at what it delivered.
 */
export const startTurn = (quote: TurnQuote, _options: { readonly key: KeyRecord | undefined; readonly continuity: Continuity }): Effect.Effect<Turn, TurnError, Catalog | ModelCaller | Scope.Scope> =>
  Effect.gen(function*() {
    const catalog = yield* Catalog
    const call = yield* (yield* ModelCaller).call(quote.request)
    const settledWith = yield* Deferred.make<TurnSettlement>()
    const builder = makeResponseBuilder()
    let usage = emptyUsage
    const settle = (final: Usage) => {
      const model = catalog.chatModel(call.servedModel)
      const costMicros = model === undefined ? 0 : Math.min(callCostMicros(final, model), quote.worstCaseMicros)
      return Deferred.succeed(settledWith, { model: call.servedModel, usage: final, costMicros })
    }
    const response = Stream.runForEach(call.events, (event: CanonicalEvent) =>
      Effect.sync(() => {
        builder.add(event)
        if (event.type === "message_start" && event.usage !== undefined) usage = event.usage
        if (event.type === "message_stop") usage = event.usage
      })).pipe(
        Effect.flatMap(() => Effect.sync(() => builder.finish())),
        Effect.onExit((exit) => settle(Exit.isSuccess(exit) ? exit.value.usage : usage))
      )
    return { servedModel: call.servedModel, response, settled: Deferred.await(settledWith) }
  })
