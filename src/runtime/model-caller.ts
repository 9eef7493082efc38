/**
 * Calls a catalog model the way every surface (chat dialects, agent runs, embedders) must:
 *
 *   prepare: rate limits + allowance reservation (429s here, before any waiting)
 *   start:   dispatch over the candidates — the model's placements, then (continuity "auto") its
 *            equivalents that can serve the request — waiting in their capacity queues, retrying
 *            and failing over (Dispatcher); resolves at the first event, naming what served
 *   events:  the answer; when it ends, the real usage is settled at the serving model's list
 *            rates (a broken or abandoned stream is charged what it delivered)
 *
 * Where metering is one round trip to Redis (`Meter.admitsInOneTrip`) the dispatch begins with
 * it: the first enqueue leaves in the same socket write and takes a slot only with the admission
 * ticket the metering script leaves for an admitted call (`PendingAdmission`), so admission and
 * slot cost one round trip, and a refused call takes nothing.
 *
 * The request sent upstream carries the reserved output ceiling as its output limit, so usage can
 * never outgrow the reservation. Everything is tied to the caller's Scope: a call abandoned before
 * it settles returns its reservation and its slot.
 */
import { Cause, Context, Deferred, Effect, Exit, Fiber, Layer, type Scope, Stream } from "effect"
import { type BackendError } from "../backends/backend.ts"
import { Catalog } from "../catalog/catalog.ts"
import { unmetRequirement } from "../catalog/requirements.ts"
import type { ChatModel, EmbeddingModel } from "../config/schema.ts"
import { Settings } from "../config/settings.ts"
import { type LimitExceeded, NotImplemented, PermissionDenied, type ServiceUnavailable } from "../errors.ts"
import type { KeyRecord } from "../keys/keys-repo.ts"
import { allowsModel, allPermissions, type Permissions } from "../keys/permissions.ts"
import { type BeginRequest, Meter, type MeteredCall, type MeteredModel, reservedOutputCeiling } from "../metering/meter.ts"
import { outputCeiling, worstCaseOverMicros } from "../metering/pricing.ts"
import type { Micros } from "../model/money.ts"
import type { AnswerSoFar, CanonicalEvent, CanonicalResponse } from "../model/events.ts"
import type { CanonicalRequest } from "../model/request.ts"
import { countRequestTokens, requestTokenBound, textsTokenBound } from "../model/tokens.ts"
import { addUsage, makeUsage, type Usage } from "../model/usage.ts"
import type { RequestRecord } from "../observability/request-record.ts"
import { Telemetry } from "../observability/telemetry.ts"
import type { PendingAdmission, QueueTimeout } from "./capacity-queue-types.ts"
import { CapacityQueues } from "./capacity-queues.ts"
import { type DispatchCandidate, Dispatcher, type DispatchHooks } from "./dispatcher.ts"
import { canResumeFromPrefix, Placements } from "./placements.ts"
import { Delivered } from "./delivered.ts"
import { newId } from "../util/ids.ts"

/** "auto": equivalents may serve when the named model cannot (the default); "exact": never. */
export type Continuity = "auto" | "exact"

/** `deadlineMs` defaults to `GATEWAY_QUEUE_MAX_WAIT_MS`; `onQueued` e.g. commits SSE headers. */
export interface ModelCallOptions extends DispatchHooks {
  /** Whose call: fairness in the queues, the plan's rate limits, the allowance charged. */
  readonly key: KeyRecord
  readonly continuity?: Continuity | undefined
  /**
   * The meter's id of this call (allowance reservation, ledger entry); generated when absent. A
   * caller that may repeat a call (a run step re-run after a takeover) passes a stable id, so the
   * repeat is charged once.
   */
  readonly requestId?: string | undefined
  /**
   * The request's metered input tokens when the caller already has them from `quote` of this same
   * request (a run step prices its budget hold first): the prompt is then not counted again.
   */
  readonly inputTokens?: number | undefined
}

/** What a finished (or abandoned) call was charged. */
export interface Settlement {
  readonly model: string
  readonly usage: Usage
  /**
   * What the key bore under the call's id: this call's charge, or — for a run step re-run after a
   * takeover, whose earlier attempt settled the same id first — that attempt's (`MeterSettlement`).
   */
  readonly costMicros: Micros
}

export interface ModelCall {
  /** Canonical id of the model that produced the first event (`xsvc-model`). */
  readonly servedModel: string
  readonly placementId: string
  /** The answer; run it once. Settles when it ends, fails or is interrupted. */
  readonly events: Stream.Stream<CanonicalEvent, BackendError | QueueTimeout>
  /**
   * The answer as `events` has delivered it so far, assembled: fed each chunk before the chunk is
   * passed on, so a reader of `events` finds every event it has seen in it.
   */
  readonly answer: AnswerSoFar
  /** `x-ratelimit-*` and `xsvc-allowance-remaining`, as of the latest step. */
  headers(): Record<string, string>
  /** Resolves once the call is settled. */
  readonly settled: Effect.Effect<Settlement>
}

/** A non-streamed call, answered and settled. */
export interface CompletedCall {
  readonly servedModel: string
  readonly placementId: string
  readonly response: CanonicalResponse
  /** `x-ratelimit-*` and `xsvc-allowance-remaining` after the settle. */
  readonly headers: Record<string, string>
}

export interface PreparedCall {
  /** The request as it goes upstream: the reserved output ceiling is its output limit. */
  readonly request: CanonicalRequest
  headers(): Record<string, string>
  /**
   * Dispatches (on Redis: takes over the dispatch `prepare` began behind the metering); resolves at
   * the first event. Run it at once, at most once.
   */
  readonly start: Effect.Effect<ModelCall, BackendError | QueueTimeout>
}

export interface Quote {
  readonly inputTokens: number
  readonly maxOutputTokens: number
  /** The reservation a call of this request takes: the worst case over the models that may serve. */
  readonly worstCaseMicros: Micros
}

/** What a started call needs of its metering. */
type CallMetering = Pick<MeteredCall, "settle" | "fail" | "headers">

export type PrepareError = LimitExceeded | ServiceUnavailable | NotImplemented | PermissionDenied

export class ModelCaller extends Context.Service<ModelCaller, {
  /** Meters and readies a call of `request.model` (a canonical id); nothing is dispatched yet. */
  prepare(request: CanonicalRequest, options: ModelCallOptions): Effect.Effect<PreparedCall, PrepareError, Scope.Scope>
  /** `prepare` then `start`. */
  call(request: CanonicalRequest, options: ModelCallOptions): Effect.Effect<ModelCall, PrepareError | BackendError | QueueTimeout, Scope.Scope>
  /**
   * The whole answer at once, for a caller that does not stream: metered like `call`, dispatched
   * with the same retries and failover, the upstream called without streaming; settled before it
   * returns.
   */
  complete(request: CanonicalRequest, options: ModelCallOptions): Effect.Effect<CompletedCall, PrepareError | BackendError | QueueTimeout, Scope.Scope>
  /**
   * What a call of this request would reserve (for budgets kept beside the allowance); with `key`,
   * over the models that key may use (without it, over every model that may serve: an upper bound).
   */
  quote(request: CanonicalRequest, continuity?: Continuity, key?: KeyRecord): Effect.Effect<Quote, NotImplemented>
  /** Metered, queued embedding call. */
  embed(
    model: EmbeddingModel,
    texts: ReadonlyArray<string>,
    options: ModelCallOptions
  ): Effect.Effect<{ vectors: ReadonlyArray<ReadonlyArray<number>>; inputTokens: number; servedModel: string; headers: Record<string, string> }, PrepareError | BackendError | QueueTimeout, Scope.Scope>
}>()("gateway/runtime/ModelCaller") {
  /** Needs Catalog, Placements, Dispatcher, CapacityQueues, Meter, Settings. */
  static readonly layer = Layer.effect(ModelCaller, Effect.gen(function*() {
    const catalog = yield* Catalog
    const placements = yield* Placements
    const dispatcher = yield* Dispatcher
    const queues = yield* CapacityQueues
    const meter = yield* Meter
    const settings = yield* Settings
    const { metrics } = yield* Telemetry

    /**
     * The models that may serve, in preference order: the model, then its capable equivalents —
     * only those the key may use. This is the one place candidates are chosen, so continuity never
     * serves (nor prices a reservation at) a model the key could not name itself: chat, runs and
     * anything else that calls through here.
     */
    const servingModels = (request: CanonicalRequest, continuity: Continuity, permissions: Permissions): ReadonlyArray<ChatModel> => {
      const model = catalog.chatModel(request.model)
      if (model === undefined || !allowsModel(permissions, model.id)) return []
      if (continuity === "exact") return [model]
      const equivalents = (model.equivalents ?? [])
        .map((id) => catalog.chatModel(id))
        .filter((m): m is ChatModel =>
          m !== undefined && allowsModel(permissions, m.id) && unmetRequirement(m, { ...request, model: m.id }) === undefined
        )
      return [model, ...equivalents]
    }

    const candidatesFor = (request: CanonicalRequest, models: ReadonlyArray<ChatModel>): ReadonlyArray<DispatchCandidate> =>
      models.flatMap((model) =>
        placements.ofModel(model.id).map(({ runtime, backend }): DispatchCandidate => {
          // The request itself when it already names the model (the usual case): a copy per
          // candidate is kept by its closures for as long as a stream is open (144 bytes).
          const forModel = request.model === model.id ? request : { ...request, model: model.id }
          const complete = backend.complete
          return {
            placementId: runtime.id,
            modelId: model.id,
            run: () => backend.stream(forModel, runtime),
            complete: complete === undefined ? undefined : () => complete(forModel, runtime),
            resume: canResumeFromPrefix(backend)
              ? (textSoFar) =>
                backend.stream({ ...forModel, messages: [...forModel.messages, { role: "assistant", content: [{ type: "text", text: textSoFar }] }] }, runtime)
              : undefined
          }
        })
      )

    const quote = Effect.fn("ModelCaller.quote")(function*(request: CanonicalRequest, continuity: Continuity = "auto", key?: KeyRecord) {
      const models = servingModels(request, continuity, key?.permissions ?? allPermissions)
      if (models.length === 0) return yield* new NotImplemented({ message: `The model ${request.model} has no placement that can serve` })
      const inputTokens = yield* meteredInputTokens(request, models[0])
      const maxOutputTokens = outputCeiling(models[0], inputTokens, request.maxOutputTokens)
      return { inputTokens, maxOutputTokens, worstCaseMicros: worstCaseOverMicros(models, inputTokens, maxOutputTokens) }
    })

    /**
     * The models that may serve and the call's metering (429s here): the reservation covers the
     * worst of them, and the request sent upstream carries the reserved output ceiling. A model the
     * key may not name is refused here too (the embedded API has no route check). What is asked
     * of the meter, and the request as it goes upstream, before the meter is asked.
     */
    const meteringOf = Effect.fnUntraced(function*(request: CanonicalRequest, options: ModelCallOptions) {
      if (!allowsModel(options.key.permissions, request.model)) {
        return yield* new PermissionDenied({ message: `This key is not allowed to use the model ${request.model}` })
      }
      const models = servingModels(request, options.continuity ?? "auto", options.key.permissions)
      if (!models.some((model) => placements.ofModel(model.id).length > 0)) {
        return yield* new NotImplemented({ message: `No placement of ${request.model} has an available backend` })
      }
      const inputTokens = options.inputTokens ?? (yield* meteredInputTokens(request, models[0]))
      const begin: BeginRequest = {
        key: options.key,
        model: models[0],
        alternatives: models.slice(1),
        inputTokens,
        maxOutputTokens: request.maxOutputTokens,
        requestId: options.requestId
      }
      const sent: CanonicalRequest = { ...request, maxOutputTokens: reservedOutputCeiling(begin) }
      return { models, begin, sent }
    })

    /**
     * The metering of a call whose dispatch rides behind it (`Meter.admitsInOneTrip`): sent at
     * once, in a fiber of its own; `admitted` is its answer, `admission` what the dispatch's first
     * acquire carries (it waits forever on a refusal: the caller interrupts it).
     */
    const meterAhead = Effect.fnUntraced(function*(begin: BeginRequest) {
      const ticket = newId("adm")
      const metering = yield* Effect.forkChild(meter.beginScoped({ ...begin, ticket }), { startImmediately: true })
      const admitted = Fiber.join(metering)
      const admission: PendingAdmission = { ticket, admitted: admitted.pipe(Effect.asVoid, Effect.catch(() => Effect.never)) }
      return { admitted, admission }
    })

    const prepare = Effect.fnUntraced(function*(request: CanonicalRequest, options: ModelCallOptions) {
      const { models, begin, sent } = yield* meteringOf(request, options)
      const call = {
        models,
        sent,
        upstream: candidatesFor(sent, models),
        settledSignal: Deferred.makeUnsafe<Settlement>()
      }
      if (!meter.admitsInOneTrip) {
        const metered = yield* meter.beginScoped(begin)
        return { request: sent, headers: metered.headers, start: startCall(options, { ...call, metered, admission: undefined }) } satisfies PreparedCall
      }
      // One round trip: the dispatch starts now, behind the metering, and `start` takes it over;
      // a refused call's dispatch is interrupted before `prepare` fails.
      const { admitted, admission } = yield* meterAhead(begin)
      let known: MeteredCall | undefined
      // The dispatch holds a slot only once the call is admitted, so its settle or failure finds
      // the metering answered.
      const metered: CallMetering = {
        settle: (usage, servedBy) => Effect.flatMap(Effect.orDie(admitted), (m) => m.settle(usage, servedBy)),
        fail: () => Effect.flatMap(Effect.exit(admitted), (exit) => (Exit.isSuccess(exit) ? exit.value.fail() : Effect.void)),
        headers: () => known?.headers() ?? {}
      }
      const started = yield* Effect.forkScoped(startCall(options, { ...call, metered, admission }), { startImmediately: true })
      known = yield* admitted.pipe(Effect.tapError(() => Fiber.interrupt(started)))
      const start = Fiber.join(started).pipe(Effect.onInterrupt(() => Fiber.interrupt(started)))
      return { request: sent, headers: known.headers, start } satisfies PreparedCall
    })

    /**
     * The dispatch of a prepared call, and the settle when its stream ends. A generator made once
     * for the service, not per call (see `answer` in http/chat-answer.ts: a per-request `function*`
     * keeps the request alive through young-generation collections).
     */
    const startCall = Effect.fnUntraced(function*(options: ModelCallOptions, prepared: {
      readonly models: ReadonlyArray<ChatModel>
      readonly metered: CallMetering
      readonly sent: CanonicalRequest
      readonly upstream: ReadonlyArray<DispatchCandidate>
      readonly settledSignal: Deferred.Deferred<Settlement>
      readonly admission: PendingAdmission | undefined
    }) {
      const { models, metered, sent, upstream, settledSignal, admission } = prepared
      // The models that may serve are a handful: a scan, not a Map each open stream holds.
      const modelById = (id: string) => models.find((m) => m.id === id)
      let servingModel = models[0]
      const usage = new Delivered(sent)

      /** Settles exactly once, whatever ended the stream. */
      const finish = (exit: Exit.Exit<unknown, BackendError | QueueTimeout>): Effect.Effect<void> => {
        if (!Exit.isSuccess(exit) && !usage.produced) {
          return Effect.andThen(metered.fail(), Effect.sync(() => {
            Deferred.doneUnsafe(settledSignal, Exit.succeed({ model: servingModel.id, usage: makeUsage({}), costMicros: 0 }))
          }))
        }
        return Effect.flatMap(usage.usage(), (used) =>
          Effect.map(metered.settle(used, servingModel), ({ chargedMicros, keyCharge }) => {
            noteCharge(options.record, used, chargedMicros)
            // Whoever awaits the settlement (a run step) gets what the key bore under the call's id,
            // once the store says; the stream's end does not wait for it.
            const model = servingModel.id
            Deferred.doneUnsafe(settledSignal, Effect.map(keyCharge, (costMicros) => ({ model, usage: used, costMicros })))
          }))
      }

      const dispatched = yield* dispatcher.dispatch({
        candidates: upstream,
        keyId: options.key.id,
        deadlineMs: options.deadlineMs ?? settings.queueMaxWaitMs,
        onQueued: options.onQueued,
        priority: options.priority,
        record: options.record,
        onContinue: (to) =>
          Effect.suspend(() => {
            servingModel = modelById(to.modelId) ?? servingModel
            return options.onContinue === undefined ? Effect.void : options.onContinue(to)
          }),
        // Fed per chunk in the dispatcher's own stage (no mapArray + onExit stages of our own).
        delivered: usage,
        onEnd: finish,
        admission
      }).pipe(Effect.tapError(() => metered.fail()))
      servingModel = modelById(dispatched.servedModel) ?? servingModel
      if (options.record !== undefined) options.record.servedModel = dispatched.servedModel
      const events = dispatched.events

      return {
        servedModel: dispatched.servedModel,
        placementId: dispatched.placementId,
        events,
        answer: usage.answer,
        headers: metered.headers,
        settled: Deferred.await(settledSignal)
      } satisfies ModelCall
    })

    const call = Effect.fnUntraced(function*(request: CanonicalRequest, options: ModelCallOptions) {
      const prepared = yield* prepare(request, options)
      return yield* prepared.start
    })

    /**
     * Metering and the dispatch's wait for a slot. Where admission is one round trip to Redis the
     * dispatch starts before its answer, so the first enqueue leaves in the same socket write and
     * the two cost one round trip; the enqueue takes a slot only if the call was admitted
     * (`PendingAdmission`), and a refused call's dispatch is interrupted.
     */
    const meteredDispatch = Effect.fnUntraced(function*(request: CanonicalRequest, options: ModelCallOptions) {
      const { models, begin, sent } = yield* meteringOf(request, options)
      const dispatch = (admission: PendingAdmission | undefined) =>
        dispatcher.complete({
          candidates: candidatesFor(sent, models),
          keyId: options.key.id,
          deadlineMs: options.deadlineMs ?? settings.queueMaxWaitMs,
          onQueued: options.onQueued,
          priority: options.priority,
          record: options.record,
          admission
        })
      if (!meter.admitsInOneTrip) {
        const metered = yield* meter.beginScoped(begin)
        return { models, metered, completed: yield* dispatch(undefined).pipe(Effect.tapError(() => metered.fail())) }
      }
      const { admitted, admission } = yield* meterAhead(begin)
      const dispatching = yield* Effect.forkChild(dispatch(admission), { startImmediately: true })
      const metered = yield* admitted.pipe(Effect.tapError(() => Fiber.interrupt(dispatching)))
      return { models, metered, completed: yield* Fiber.join(dispatching).pipe(Effect.tapError(() => metered.fail())) }
    })

    const complete = Effect.fnUntraced(function*(request: CanonicalRequest, options: ModelCallOptions) {
      const { models, metered, completed } = yield* meteredDispatch(request, options)
      const servedBy = models.find((m) => m.id === completed.servedModel) ?? models[0]
      const usage = completed.response.usage
      const { chargedMicros } = yield* metered.settle(usage, servedBy)
      if (options.record !== undefined) options.record.servedModel = servedBy.id
      noteCharge(options.record, usage, chargedMicros)
      return { ...completed, headers: metered.headers() } satisfies CompletedCall
    })

    const embed = Effect.fnUntraced(function*(model: EmbeddingModel, texts: ReadonlyArray<string>, options: ModelCallOptions) {
      const serving = placements.ofModel(model.id)
      if (serving.length === 0) return yield* new NotImplemented({ message: `No placement of ${model.id} has an available backend` })
      // An embedding call has no output: it is metered as input at the model's input rate.
      const priced: MeteredModel = {
        id: model.id,
        pricing: { input: model.pricing.input, output: 0, cachedInput: null },
        maxOutput: 1,
        contextWindow: Number.MAX_SAFE_INTEGER
      }
      const inputTokens = yield* textsTokenBound(texts)
      const metered = yield* meter.beginScoped({ key: options.key, model: priced, inputTokens, maxOutputTokens: 1 })
      const askedAt = performance.now()
      const lease = yield* queues.acquire({
        candidates: serving.map((p) => p.runtime.id),
        keyId: options.key.id,
        deadlineMs: options.deadlineMs ?? settings.queueMaxWaitMs,
        onQueued: options.onQueued,
        priority: options.priority
      }).pipe(Effect.tapError(() => metered.fail()))
      const placement = serving.find((p) => p.runtime.id === lease.placementId)!
      const grantedAt = performance.now()
      metrics?.queueWait(lease.placementId, (grantedAt - askedAt) / 1000)
      const record = options.record
      if (record !== undefined) {
        record.queueWaitMs += grantedAt - askedAt
        record.attempts++
        record.placement = lease.placementId
      }
      if (placement.backend.embed === undefined) {
        yield* lease.release("success")
        yield* metered.fail()
        return yield* new NotImplemented({ message: `The backend of ${model.id} cannot embed` })
      }
      const result = yield* placement.backend.embed({ model: model.id, texts, dimensions: model.dimensions }, placement.runtime).pipe(
        Effect.onExit((exit) => {
          const outcome = isRetryableExit(exit) ? "failure" : Exit.isFailure(exit) && Cause.hasInterruptsOnly(exit.cause) ? "cancelled" : "success"
          const upstreamMs = performance.now() - grantedAt
          metrics?.upstream(lease.placementId, model.id, outcome, upstreamMs / 1000)
          if (record !== undefined) record.upstreamMs += upstreamMs
          return lease.release(outcome === "cancelled" ? "success" : outcome)
        }),
        Effect.tapError(() => metered.fail())
      )
      const used = makeUsage({ inputTokens: result.inputTokens })
      const { chargedMicros } = yield* metered.settle(used, priced)
      if (record !== undefined) record.servedModel = model.id
      noteCharge(record, used, chargedMicros)
      return { ...result, servedModel: model.id, headers: metered.headers() }
    })

    return ModelCaller.of({ prepare, call, complete, quote, embed })
  }))
}

/**
 * The input tokens a call is metered at: the upper bound (no tokenizer), unless that bound would
 * shorten the output ceiling (a prompt near the context window) — then the exact count, so a
 * loose bound never cuts an answer short.
 */
const meteredInputTokens = (request: CanonicalRequest, model: ChatModel): Effect.Effect<number> =>
  Effect.flatMap(requestTokenBound(request), (bound) =>
    outputCeiling(model, bound, request.maxOutputTokens) === outputCeiling(model, 0, request.maxOutputTokens)
      ? Effect.succeed(bound)
      : countRequestTokens(request))

/** The request's record learns what its call was charged (the metrics learn it from the meter). */
const noteCharge = (record: RequestRecord | undefined, usage: Usage, costMicros: Micros) => {
  if (record === undefined) return
  record.usage = record.usage === undefined ? usage : addUsage(record.usage, usage)
  record.costMicros = (record.costMicros ?? 0) + costMicros
}

const isRetryableExit = (exit: Exit.Exit<unknown, BackendError>) =>
  Exit.isFailure(exit) && exit.cause.reasons.some((reason) => Cause.isFailReason(reason) && reason.error.retryable)
