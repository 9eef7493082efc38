/**
 * The one entry the request path calls. Between authentication/model resolution and dispatch:
 *
 *   const call = yield* meter.begin({ key, model, inputTokens, maxOutputTokens })   // 429s here
 *   // send call.maxOutputTokens upstream as the output limit (the reservation covers exactly that)
 *   // response headers: call.headers()
 *   yield* call.settle(usage)   // or call.fail() when the model produced nothing
 *
 * `begin` takes rate-limit admission first (cheap; refuses floods before touching the allowance),
 * then reserves the worst case: the input estimate plus the output ceiling at list prices. Use
 * `beginScoped` where a Scope is at hand: a call neither settled nor failed when the scope closes
 * (interruption, defect) is failed then, so its slot and reservation are never leaked.
 */
import { Context, Deferred, Effect, FiberSet, Layer, Option, type Scope } from "effect"
import { ConfigFile } from "../config/config-file.ts"
import { Settings } from "../config/settings.ts"
import { Coordination } from "../coordination/coordination.ts"
import type { ChatModel, Plan } from "../config/schema.ts"
import { LimitExceeded, type ServiceUnavailable } from "../errors.ts"
import type { KeyRecord } from "../keys/keys-repo.ts"
import { newId } from "../util/ids.ts"
import { formatUsd, type Micros } from "../model/money.ts"
import type { Usage } from "../model/usage.ts"
import { Allowance, type Reservation } from "./allowance.ts"
import { callCostMicros, outputCeiling, worstCaseOverMicros } from "./pricing.ts"
import { type Admission, RateLimits } from "./rate-limits.ts"
import { UsageLedger } from "./usage-ledger.ts"
import { Telemetry } from "../observability/telemetry.ts"
import { acquireReleasePlain } from "../util/scoped.ts"

/** What metering needs of a model: its list rates and output limits (chat and embedding models). */
export type MeteredModel = Pick<ChatModel, "id" | "pricing" | "maxOutput" | "contextWindow">

export interface BeginRequest {
  readonly key: KeyRecord
  readonly model: MeteredModel
  /**
   * Other models that may serve the call (continuity equivalents): the reservation covers the
   * most expensive of them, so a failover can never be charged past what was held.
   */
  readonly alternatives?: ReadonlyArray<Pick<ChatModel, "pricing">> | undefined
  /** The input tokens: an upper bound (model/tokens.ts `requestTokenBound`), never below the real count. */
  readonly inputTokens: number
  /** The request's own output limit (`max_tokens`, `max_output_tokens`…), when it sets one. */
  readonly maxOutputTokens?: number | undefined
  /** Unique per call; generated when absent. */
  readonly requestId?: string | undefined
  /**
   * Where `admitsInOneTrip`: an id unique to the call, under which an admitted call leaves the
   * admission ticket its capacity-queue enqueue takes (`PendingAdmission`).
   */
  readonly ticket?: string | undefined
}

/** The output ceiling a call's reservation covers (`MeteredCall.maxOutputTokens`), known before it is made. */
export const reservedOutputCeiling = (request: Pick<BeginRequest, "model" | "inputTokens" | "maxOutputTokens">): number =>
  outputCeiling(request.model, Math.max(0, Math.ceil(request.inputTokens)), request.maxOutputTokens)

/** How long `keyCharge` waits for a remote store's answer before it takes the call's own charge. */
const KEY_CHARGE_WAIT = "3 seconds"

/** What a settle charged. */
export interface MeterSettlement {
  /** The call's cost at the serving model's rates. */
  readonly costMicros: Micros
  /** This call's charge: its cost, at most what was reserved. */
  readonly chargedMicros: Micros
  /**
   * What the key bore under the call's id once the store has answered: `chargedMicros`, or —
   * when a settle of the same id reached the store first (a run step re-run after a takeover) —
   * that settle's charge, so a run reports what its key was charged. At once in process; on Redis
   * when the settle, sent after the answer, lands (`chargedMicros` if its answer never comes).
   */
  readonly keyCharge: Effect.Effect<Micros>
}

export interface MeteredCall {
  readonly requestId: string
  /** The output ceiling the reservation covers: send it upstream as the output limit. */
  readonly maxOutputTokens: number
  readonly reservedMicros: Micros
  /**
   * Charges the real cost at the rates of the model that served (default: the requested one), at
   * most the reservation; records it, frees the slot. First call wins.
   */
  settle(usage: Usage, servedBy?: Pick<ChatModel, "id" | "pricing">): Effect.Effect<MeterSettlement>
  /** For a call that produced no output: returns the reservation. A no-op after settle. */
  fail(): Effect.Effect<void>
  /** x-ratelimit-* and `xsvc-allowance-remaining` (decimal USD), as of the latest step. */
  headers(): Record<string, string>
}

export class Meter extends Context.Service<Meter, {
  begin(request: BeginRequest): Effect.Effect<MeteredCall, LimitExceeded | ServiceUnavailable>
  beginScoped(request: BeginRequest): Effect.Effect<MeteredCall, LimitExceeded | ServiceUnavailable, Scope.Scope>
  /** The plan a key is metered under (its configured plan, else the default plan). */
  planOf(key: KeyRecord): Plan
  /**
   * Admission is one round trip to a remote store (Redis), which a ticket can follow: the caller
   * may send the capacity queue's enqueue behind it instead of after its answer.
   */
  readonly admitsInOneTrip: boolean
}>()("gateway/metering/Meter") {
  /** Needs Allowance, RateLimits, UsageLedger and ConfigFile. */
  /**
   * `enforce: false` (GATEWAY_METERING=off) skips rate limits and the allowance: calls are only
   * priced and recorded in the ledger. For single-tenant deployments that meter elsewhere, and for
   * measuring what the checks cost.
   */
  static readonly layerWith = (options: { readonly enforce?: boolean }) => Layer.effect(Meter, Effect.gen(function*() {
    const enforce = options.enforce ?? true
    const config = yield* ConfigFile
    const allowance = yield* Allowance
    const rateLimits = yield* RateLimits
    const ledger = yield* UsageLedger
    const store = yield* Coordination
    // Tokens and cost by model are counted where a call is settled: every surface passes here.
    const { metrics } = yield* Telemetry

    const planOf = (key: KeyRecord): Plan => config.plans[key.plan] ?? config.plans[config.defaultPlan]

    // Settles on a remote store, run after the answer. The layer's close waits for those in
    // flight (a bounded wait: a store that is down has its settles retried by the allowance),
    // so a shutdown that drained the requests records their charges before the ledger's last flush.
    const settling = yield* FiberSet.make<void>()
    yield* Effect.addFinalizer(() => FiberSet.awaitEmpty(settling).pipe(Effect.timeout("5 seconds"), Effect.ignore))
    const settleInBackground = (effect: Effect.Effect<unknown>) => FiberSet.run(settling, Effect.asVoid(effect))

    /**
     * A metered call over its admission and reservation. Settling goes to the store first, then the
     * ledger: a rebuild that runs in between reads SQL without this entry and the settle (finding
     * no hold) still charges it, so it is counted exactly once. Only the settle that charged writes
     * the ledger row and counts the charge metrics (`gateway_tokens_total`,
     * `gateway_cost_usd_total`): a call settled twice under one request id (a run step re-run on
     * another instance) is charged and recorded at the usage of whichever settle reached the store
     * first.
     */
    class Metered implements MeteredCall {
      readonly requestId: string
      readonly maxOutputTokens: number
      readonly reservedMicros: Micros
      readonly #request: BeginRequest
      readonly #admission: Admission
      readonly #reservation: Reservation
      /** The key's allowance left, as of this call's latest step (`xsvc-allowance-remaining`). */
      #remaining: Micros | undefined
      #finished = false

      constructor(request: BeginRequest, maxOutputTokens: number, requestId: string, admission: Admission, reservation: Reservation) {
        this.requestId = requestId
        this.maxOutputTokens = maxOutputTokens
        this.reservedMicros = reservation.amountMicros
        this.#request = request
        this.#admission = admission
        this.#reservation = reservation
        this.#remaining = reservation.remainingMicros
      }

      settle(usage: Usage, servedBy: Pick<ChatModel, "id" | "pricing"> = this.#request.model): Effect.Effect<MeterSettlement> {
        // In process: every step is a plain call, one Effect per settle.
        const fast = allowance.now
        const releaseNow = this.#admission.releaseNow
        return fast !== undefined && releaseNow !== undefined
          ? Effect.clockWith((clock) => Effect.succeed(this.settleNow(fast, releaseNow, usage, servedBy, clock.currentTimeMillisUnsafe())))
          : Effect.suspend(() => this.settleRemote(usage, servedBy))
      }

      fail(): Effect.Effect<void> {
        const fast = allowance.now
        const releaseNow = this.#admission.releaseNow
        if (fast !== undefined && releaseNow !== undefined) {
          return Effect.clockWith((clock) =>
            Effect.sync(() => {
              if (this.#finished) return
              this.#finished = true
              const after = fast.release(this.#reservation, clock.currentTimeMillisUnsafe())
              if (after !== undefined) this.#remaining = after
              releaseNow()
            })
          )
        }
        return Effect.suspend(() => {
          if (this.#finished) return Effect.void
          this.#finished = true
          return Effect.andThen(
            Effect.map(allowance.release(this.#reservation), (after) => {
              if (after !== undefined) this.#remaining = after
            }),
            this.#admission.release
          )
        })
      }

      /**
       * An own property, not a method: it is handed on unbound (`ModelCall.headers`). The other
       * steps are the prototype's, so a call holds one closure, not one per step over a shared
       * context (~0.3 KiB an open stream held).
       */
      readonly headers = (): Record<string, string> => {
        const remaining = this.#remaining
        return {
          ...rateLimits.headers(this.#admission.state),
          ...(remaining === undefined ? {} : { "xsvc-allowance-remaining": formatUsd(remaining) })
        }
      }

      private entry(usage: Usage, servedBy: Pick<ChatModel, "id" | "pricing">, chargedMicros: Micros) {
        return {
          keyId: this.#request.key.id,
          model: servedBy.id,
          requestId: this.requestId,
          usage,
          costMicros: chargedMicros,
          at: new Date(this.#reservation.at),
          funding: this.#reservation.funding
        }
      }

      private settleNow(fast: NonNullable<typeof allowance.now>, releaseNow: () => void, usage: Usage, servedBy: Pick<ChatModel, "id" | "pricing">, now: number): MeterSettlement {
        const reservation = this.#reservation
        const costMicros = callCostMicros(usage, servedBy)
        const chargedMicros = Math.min(costMicros, reservation.amountMicros)
        if (this.#finished) return { costMicros, chargedMicros, keyCharge: Effect.succeed(chargedMicros) }
        this.#finished = true
        const after = fast.settle(reservation, costMicros, now)
        if (after.remaining !== undefined) this.#remaining = after.remaining
        if (after.charged) {
          ledger.recordNow(this.entry(usage, servedBy, chargedMicros))
          metrics?.charged(servedBy.id, usage, chargedMicros)
        }
        releaseNow()
        return { costMicros, chargedMicros, keyCharge: Effect.succeed(after.chargedMicros ?? chargedMicros) }
      }

      private settleRemote(usage: Usage, servedBy: Pick<ChatModel, "id" | "pricing">): Effect.Effect<MeterSettlement> {
        const reservation = this.#reservation
        const costMicros = callCostMicros(usage, servedBy)
        const chargedMicros = Math.min(costMicros, reservation.amountMicros)
        if (this.#finished) return Effect.succeed({ costMicros, chargedMicros, keyCharge: Effect.succeed(chargedMicros) })
        this.#finished = true
        const keyCharge = Deferred.makeUnsafe<Micros>()
        // A remote store: the settle is a round trip the answer need not wait for. The hold
        // stays counted until it lands (later calls see more spent, never less), and the
        // store's connection sends it before any later command of this instance. What is
        // left is this call's own view: after its reservation, less its charge.
        this.#remaining = reservation.remainingMicros + reservation.amountMicros - chargedMicros
        // The admission's lease goes back beside the settle, not after its reply (as in process:
        // the call is over): both commands leave in the same turn, so in one socket write (the
        // release does not wait for the store: no fiber of its own).
        return Effect.as(
          Effect.andThen(
            settleInBackground(
              // Store first, then the ledger and the charge metrics, by the settle that charged.
              Effect.flatMap(allowance.settle(reservation, costMicros), (settled) => {
                Deferred.doneUnsafe(keyCharge, Effect.succeed(settled.chargedMicros ?? chargedMicros))
                if (!settled.charged) return Effect.void
                metrics?.charged(servedBy.id, usage, chargedMicros)
                return ledger.record(this.entry(usage, servedBy, chargedMicros))
              }).pipe(Effect.onInterrupt(() => Effect.sync(() => Deferred.doneUnsafe(keyCharge, Effect.succeed(chargedMicros)))))
            ),
            this.#admission.release
          ),
          {
            costMicros,
            chargedMicros,
            // Bounded: a store that is down has the settle retried for as long as it takes.
            keyCharge: Deferred.await(keyCharge).pipe(Effect.timeoutOption(KEY_CHARGE_WAIT), Effect.map(Option.getOrElse(() => chargedMicros)))
          }
        )
      }
    }
    const meteredCall = (request: BeginRequest, maxOutputTokens: number, requestId: string, admission: Admission, reservation: Reservation): MeteredCall =>
      new Metered(request, maxOutputTokens, requestId, admission, reservation)

    /**
     * Rate-limit admission first (cheap; refuses floods before touching the allowance), then the
     * reservation of the worst case. With the coordination store in process both are plain calls
     * inside one Effect; on Redis (or an unseeded budget to rebuild) they are the store's Effects.
     */
    // Which way `begin` admits a call: plain calls in process, else one round trip to the store.
    const admitsInProcess = rateLimits.admitNow !== undefined && allowance.now !== undefined
    const begin = (request: BeginRequest): Effect.Effect<MeteredCall, LimitExceeded | ServiceUnavailable> =>
      Effect.clockWith((clock) => {
        // A ledger that cannot write what it holds takes no new calls (usage-ledger.ts).
        const backlog = ledger.refusal()
        if (backlog !== undefined) return Effect.fail(backlog)
        const plan = planOf(request.key)
        const { key, model } = request
        const inputTokens = Math.max(0, Math.ceil(request.inputTokens))
        const maxOutputTokens = reservedOutputCeiling(request)
        if (!enforce) return Effect.succeed(recordOnly(request, maxOutputTokens))
        const admit = { keyId: key.id, plan, tokens: inputTokens + maxOutputTokens }
        const maxCostMicros = worstCaseOverMicros([model, ...(request.alternatives ?? [])], inputTokens, maxOutputTokens)
        const requestId = request.requestId ?? newId("call")
        // The ledger row's id doubles as the charge's id in the store: after a store loss, a charge
        // is re-registered and reconciled with SQL by it (allowance.ts).
        const reserve = { keyId: key.id, plan, maxCostMicros, requestId }
        const reserveEffect = (admission: Admission) =>
          allowance.reserve(reserve).pipe(
            Effect.tapError(() => admission.release),
            Effect.map((reservation) => meteredCall(request, maxOutputTokens, requestId, admission, reservation))
          )
        if (admitsInProcess) {
          const now = clock.currentTimeMillisUnsafe()
          const admission = rateLimits.admitNow(admit, now)
          if (admission instanceof LimitExceeded) return Effect.fail(admission)
          const reservation = allowance.now.reserve(reserve, now)
          if (reservation === undefined) return reserveEffect(admission) // unseeded: rebuilt by the Effect path
          if (reservation instanceof LimitExceeded) {
            admission.releaseNow?.()
            return Effect.fail(reservation)
          }
          return Effect.succeed(meteredCall(request, maxOutputTokens, requestId, admission, reservation))
        }
        if (store.gateAndReserve !== undefined) {
          // A remote store: admission and reservation in one round trip.
          const now = clock.currentTimeMillisUnsafe()
          const gate = rateLimits.prepare(admit, now)
          const hold = allowance.prepareReserve(reserve, now)
          return store.gateAndReserve(gate.gate, hold.command, request.ticket).pipe(
            Effect.matchEffect({
              // The store failed: the step-by-step path applies each policy (rate limits fail
              // open, the allowance fails closed). A failure may be a late answer (the command
              // timed out but ran): what it took is let go first, so the retry's lease and hold
              // are not counted beside it until they lapse.
              onFailure: () =>
                Effect.andThen(Effect.all([gate.abandon, hold.abandon], { concurrency: 2, discard: true }), Effect.flatMap(rateLimits.admit(admit), reserveEffect)),
              onSuccess: ([gateAnswer, holdAnswer]) => {
                const admission = gate.decide(gateAnswer)
                const reservation = hold.decide(holdAnswer)
                if (admission instanceof LimitExceeded) {
                  return reservation === undefined || reservation instanceof LimitExceeded
                    ? Effect.fail(admission)
                    : Effect.andThen(allowance.release(reservation), Effect.fail(admission))
                }
                if (reservation instanceof LimitExceeded) return Effect.andThen(admission.release, Effect.fail(reservation))
                if (reservation === undefined) return reserveEffect(admission) // unseeded: rebuilt step by step
                return Effect.succeed(meteredCall(request, maxOutputTokens, requestId, admission, reservation))
              }
            })
          )
        }
        return Effect.flatMap(rateLimits.admit(admit), reserveEffect)
      })

    /** Metering off: price and record the call, check nothing, send no limit headers. */
    const recordOnly = (request: BeginRequest, maxOutputTokens: number): MeteredCall => {
      const requestId = request.requestId ?? newId("call")
      const at = new Date()
      let finished = false
      return {
        requestId,
        maxOutputTokens,
        reservedMicros: 0,
        // No `function*` here: one made per call keeps the call's scope alive through young-generation
        // collections (see `answer` in http/chat-answer.ts).
        settle: (usage, servedBy = request.model) =>
          Effect.suspend(() => {
            const costMicros = callCostMicros(usage, servedBy)
            const settled = { costMicros, chargedMicros: costMicros, keyCharge: Effect.succeed(costMicros) }
            if (finished) return Effect.succeed(settled)
            finished = true
            return Effect.map(ledger.record({ keyId: request.key.id, model: servedBy.id, requestId, usage, costMicros, at }), () => {
              metrics?.charged(servedBy.id, usage, costMicros)
              return settled
            })
          }),
        fail: () => Effect.sync(() => void (finished = true)),
        headers: () => ({})
      }
    }

    const beginScoped = (request: BeginRequest) =>
      acquireReleasePlain(begin(request), (call) => call.fail())

    const admitsInOneTrip = enforce && !admitsInProcess && store.gateAndReserve !== undefined
    return Meter.of({ begin, beginScoped, planOf, admitsInOneTrip })
  }))

  /**
   * Metering complete but for SQL and config: Meter, Allowance, RateLimits, UsageLedger and the
   * coordination store chosen by `REDIS_URL`. Needs SqlClient (DatabaseLive), ConfigFile, Settings.
   */
  static readonly layer = Meter.layerWith({})

  static readonly layerLive = Layer.unwrap(Effect.gen(function*() {
    const { metering } = yield* Settings
    return Meter.layerWith({ enforce: metering })
  })).pipe(
    Layer.provideMerge(Layer.mergeAll(
      Layer.unwrap(Effect.gen(function*() {
        const settings = yield* Settings
        return Allowance.layerWith({
          recoveryFenceMs: settings.allowanceRecoveryFenceMs,
          epochCheckEveryMs: settings.allowanceEpochCheckMs,
          storageTimeoutMs: settings.storageTimeoutMs
        })
      })),
      RateLimits.layer
    )),
    Layer.provideMerge(UsageLedger.layer),
    Layer.provideMerge(Coordination.layer)
  )
  /** The same with an in-process store, short holds and a fast-flushing ledger. Needs SqlClient, ConfigFile. */
  static readonly layerTest = Meter.layer.pipe(
    Layer.provideMerge(Layer.mergeAll(Allowance.layerTest, RateLimits.layerTest)),
    Layer.provideMerge(UsageLedger.layerTest),
    Layer.provideMerge(Coordination.layerTest)
  )
}
