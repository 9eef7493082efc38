/**
 * The hard allowance: a key's monthly pool of list-price dollars (calendar month, UTC), or for a
 * prepaid plan its credit balance. A call first *reserves* its worst-case cost; the reservation is
 * refused when spent + reserved + cost would pass the cap, atomically in the coordination store,
 * so concurrent calls can never push spend past the allowance. After the call, `settle` turns the
 * reservation into the real cost (clamped to the reservation: a call is never charged more than it
 * reserved, which is why the request path must send the reserved output ceiling upstream) and
 * `release` returns it unused.
 *
 * - The cap is read from the plan at every reserve, so a plan upgrade lifts exhaustion at once.
 * - Store empty (first use, Redis restarted): spend is rebuilt from the SQL ledger, then retried.
 * - Store unreachable: reserve FAILS CLOSED (503 api_error, retryable) — never a blind overshoot.
 *   Settles and credit grants are idempotent and retried in the background until they land.
 * - Holds of running calls are renewed; a dead instance's holds lapse after `holdTtlMs`.
 *   Known gap: spend another instance has not flushed to SQL yet (≤ ~1 s) is missed by a rebuild.
 */
import { Clock, Context, Deferred, Effect, FiberSet, Layer, Schedule } from "effect"
import { SqlClient } from "effect/sql"
import type { SqlError } from "effect/sql"
import type { Plan } from "../config/schema.ts"
import { Coordination } from "../coordination/coordination.ts"
import type { BudgetState } from "../coordination/types.ts"
import { InvalidRequest, LimitExceeded, ServiceUnavailable } from "../errors.ts"
import { newId } from "../keys/secrets.ts"
import { formatUsd, type Micros, usdToMicros } from "../model/money.ts"
import { monthOf, secondsUntilNextMonth } from "./month.ts"
import { type Funding, UsageLedger } from "./usage-ledger.ts"

export interface Reservation {
  readonly id: string
  readonly keyId: string
  readonly funding: Funding
  /** The coordination budget: `allowance:<key>:<yyyy-mm>` or `credits:<key>`. */
  readonly budget: string
  readonly amountMicros: Micros
  /** The cap at reserve time (null: the credit balance), for the remaining figure after settle. */
  readonly capMicros: Micros | null
  /** Epoch ms of the reservation; the call is billed to this month. */
  readonly at: number
  /** What was left to reserve right after this reservation. */
  readonly remainingMicros: Micros
}

export interface AllowanceOptions {
  /** A hold not renewed for this long returns to the pool (its instance died). */
  readonly holdTtlMs?: number
  readonly renewEveryMs?: number
  /** Holds older than this stop being renewed: a leaked reservation cannot lock a budget forever. */
  readonly maxHoldMs?: number
}

export class Allowance extends Context.Service<Allowance, {
  /** `id`: the caller's id for the call (default: a new one); a reservation id is settled once. */
  reserve(request: { keyId: string; plan: Plan; maxCostMicros: Micros; id?: string }): Effect.Effect<Reservation, LimitExceeded | ServiceUnavailable>
  /** Charges min(actual, reserved). Never fails; returns the remaining micros when known. */
  settle(reservation: Reservation, actualCostMicros: Micros): Effect.Effect<Micros | undefined>
  /** For calls that failed before producing output. Never fails. */
  release(reservation: Reservation): Effect.Effect<Micros | undefined>
  /** What is left to reserve: cap − spent − reserved, at least 0 (`xsvc-allowance-remaining`). */
  remaining(keyId: string, plan: Plan): Effect.Effect<Micros, ServiceUnavailable>
  /** Tops up a prepaid balance (durably in SQL first). Returns the new balance when known. */
  addCredits(keyId: string, amountUsd: number): Effect.Effect<{ grantId: string; balanceMicros: Micros | undefined }, InvalidRequest | SqlError.SqlError>
}>()("gateway/metering/Allowance") {
  static readonly layerWith = (options: AllowanceOptions) => Layer.effect(Allowance, make(options))
  static readonly layer = Allowance.layerWith({})
  /** Short holds, for tests that watch them lapse. */
  static readonly layerTest = Allowance.layerWith({ holdTtlMs: 1_000, renewEveryMs: 300 })
}

const unavailable = (what: string) => () =>
  new ServiceUnavailable({ status: 503, message: `The allowance store is unavailable (${what}); try again shortly`, retryAfterSeconds: 1 })

const remainingOf = (state: BudgetState, cap: Micros | null) =>
  Math.max(0, (cap ?? state.granted) - state.spent - state.reserved)

function make(options: AllowanceOptions) {
  return Effect.gen(function*() {
    const store = yield* Coordination
    const ledger = yield* UsageLedger
    const sql = yield* SqlClient.SqlClient
    const holdTtlMs = options.holdTtlMs ?? 60_000
    const renewEveryMs = options.renewEveryMs ?? Math.max(100, Math.floor(holdTtlMs / 4))
    const maxHoldMs = options.maxHoldMs ?? 2 * 60 * 60_000
    const live = new Map<string, Reservation>()
    const background = yield* FiberSet.make()
    const seeding = new Map<string, Deferred.Deferred<void, ServiceUnavailable>>()

    const target = (keyId: string, plan: Plan, now: number) => {
      if (plan.prepaid === true) return { funding: "credits" as const, budget: `credits:${keyId}`, cap: null, expireAt: 0 }
      const month = monthOf(now)
      // Kept a month past its end, then forgotten (SQL still has it).
      return { funding: "allowance" as const, budget: `allowance:${keyId}:${month.label}`, cap: usdToMicros(plan.allowanceUsd), expireAt: month.end + 31 * 86_400_000 }
    }
    type Target = ReturnType<typeof target>

    /** Rebuilds a budget from SQL; concurrent callers for one budget share one rebuild. */
    const seed = (keyId: string, t: Target) => Effect.suspend(() => {
      const running = seeding.get(t.budget)
      if (running !== undefined) return Deferred.await(running)
      const done = Deferred.makeUnsafe<void, ServiceUnavailable>()
      seeding.set(t.budget, done)
      const rebuild = Effect.gen(function*() {
        if (t.funding === "allowance") {
          const spent = yield* ledger.spentThisMonth(keyId)
          yield* store.budgetSeed({ budget: t.budget, spent, granted: 0, grantIds: [], expireAt: t.expireAt })
          return
        }
        const grants = yield* sql<{ id: string; amount: number }>`SELECT id, amount_micros::float8 AS amount FROM credit_grants WHERE key_id = ${keyId}`
        const spent = yield* ledger.spentOnCredits(keyId)
        const granted = grants.reduce((sum, g) => sum + Number(g.amount), 0)
        yield* store.budgetSeed({ budget: t.budget, spent, granted, grantIds: grants.map((g) => g.id), expireAt: 0 })
      }).pipe(Effect.mapError(unavailable("rebuild")))
      return rebuild.pipe(Effect.onExit((exit) => {
        seeding.delete(t.budget)
        return Deferred.done(done, exit)
      }))
    })

    /** Runs an idempotent store write until it lands, off the caller's path. */
    const eventually = (what: string, effect: Effect.Effect<unknown, unknown>) =>
      FiberSet.run(background, effect.pipe(
        Effect.retry(Schedule.min([Schedule.exponential("200 millis"), Schedule.spaced("10 seconds")])),
        Effect.catch((error) => Effect.logError(`allowance: ${what} gave up`, error))
      )).pipe(Effect.asVoid)

    const reserve = Effect.fn("Allowance.reserve")(function*(request: { keyId: string; plan: Plan; maxCostMicros: Micros; id?: string }) {
      const now = yield* Clock.currentTimeMillis
      const t = target(request.keyId, request.plan, now)
      const id = request.id ?? newId("res")
      const amount = Math.max(0, Math.ceil(request.maxCostMicros))
      for (let attempt = 0; attempt < 3; attempt++) {
        const answer = yield* store.budgetReserve({ budget: t.budget, cap: t.cap, amount, id, ttlMs: holdTtlMs, now, expireAt: t.expireAt })
          .pipe(Effect.mapError(unavailable("reserve")))
        if (answer._tag === "Unseeded") {
          yield* seed(request.keyId, t)
          continue
        }
        if (answer._tag === "Refused") {
          const left = formatUsd(remainingOf(answer.state, t.cap))
          return yield* t.funding === "credits"
            ? new LimitExceeded({
              kind: "credits_exhausted",
              message: `Prepaid credits are exhausted ($${left} left, this request may cost up to $${formatUsd(amount)}); add credits to continue`,
              headers: { "xsvc-allowance-remaining": left }
            })
            : new LimitExceeded({
              kind: "allowance_exhausted",
              headers: { "xsvc-allowance-remaining": left },
              message: `Monthly allowance exhausted ($${left} left, this request may cost up to $${formatUsd(amount)}); it resets at the start of next month (UTC)`,
              retryAfterSeconds: secondsUntilNextMonth(now)
            })
        }
        const reservation: Reservation = {
          id, keyId: request.keyId, funding: t.funding, budget: t.budget, amountMicros: amount, capMicros: t.cap, at: now,
          remainingMicros: remainingOf(answer.state, t.cap)
        }
        live.set(id, reservation)
        return reservation
      }
      return yield* unavailable("rebuild did not take")()
    })

    const settle = Effect.fn("Allowance.settle")(function*(reservation: Reservation, actualCostMicros: Micros) {
      live.delete(reservation.id)
      if (actualCostMicros > reservation.amountMicros) {
        yield* Effect.logWarning(`allowance: call ${reservation.id} cost ${actualCostMicros} µ$ but reserved ${reservation.amountMicros}; charged the reservation`)
      }
      const write = Effect.flatMap(Clock.currentTimeMillis, (now) =>
        store.budgetSettle({ budget: reservation.budget, id: reservation.id, amount: reservation.amountMicros, actual: actualCostMicros, now }))
      const first = yield* Effect.result(write)
      if (first._tag === "Success") return first.success === undefined ? undefined : remainingOf(first.success, reservation.capMicros)
      yield* eventually(`settle ${reservation.id}`, write)
      return undefined
    })

    const release = Effect.fn("Allowance.release")(function*(reservation: Reservation) {
      live.delete(reservation.id)
      const write = Effect.flatMap(Clock.currentTimeMillis, (now) => store.budgetRelease({ budget: reservation.budget, id: reservation.id }, now))
      const first = yield* Effect.result(write)
      if (first._tag === "Success") return first.success === undefined ? undefined : remainingOf(first.success, reservation.capMicros)
      // A release that never lands only keeps the hold until it lapses: nothing to retry for.
      return undefined
    })

    const remaining = Effect.fn("Allowance.remaining")(function*(keyId: string, plan: Plan) {
      const now = yield* Clock.currentTimeMillis
      const t = target(keyId, plan, now)
      const read = store.budgetState(t.budget, now).pipe(Effect.mapError(unavailable("read")))
      let state = yield* read
      if (state === undefined) {
        yield* seed(keyId, t)
        state = yield* read
      }
      return state === undefined ? 0 : remainingOf(state, t.cap)
    })

    const addCredits = Effect.fn("Allowance.addCredits")(function*(keyId: string, amountUsd: number) {
      if (!Number.isFinite(amountUsd) || amountUsd <= 0) {
        return yield* new InvalidRequest({ message: "amountUsd: must be a positive number of dollars", param: "amountUsd" })
      }
      const grantId = newId("grant")
      const amount = usdToMicros(amountUsd)
      yield* sql`INSERT INTO credit_grants (id, key_id, amount_micros) VALUES (${grantId}, ${keyId}, ${amount})`
      const budget = `credits:${keyId}`
      const grant = store.budgetGrant({ budget, grantId, amount })
      // Durable in SQL already; if the store is down the grant is applied once it is back.
      if ((yield* Effect.result(grant))._tag === "Failure") yield* eventually(`grant ${grantId}`, grant)
      const now = yield* Clock.currentTimeMillis
      const state = yield* store.budgetState(budget, now).pipe(Effect.orElseSucceed(() => undefined))
      return { grantId, balanceMicros: state === undefined ? undefined : remainingOf(state, null) }
    })

    // Keeps holds of running calls alive; a renewal that fails is simply tried again next round.
    yield* Effect.forkScoped(Effect.forever(Effect.gen(function*() {
      yield* Effect.sleep(renewEveryMs)
      const now = yield* Clock.currentTimeMillis
      const holds = []
      for (const r of live.values()) {
        if (now - r.at > maxHoldMs) live.delete(r.id)
        else holds.push({ budget: r.budget, id: r.id, amount: r.amountMicros })
      }
      yield* store.budgetRenew(holds, holdTtlMs, now).pipe(Effect.ignore)
    })))

    return Allowance.of({ reserve, settle, release, remaining, addCredits })
  })
}
