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
 * - Store unreachable: reserve FAILS CLOSED (503 api_error, retryable) — never a blind overshoot.
 *   Settles and credit grants are idempotent and retried in the background until they land.
 * - Holds of running calls are renewed; a dead instance's holds lapse after `holdTtlMs`.
 * - First use of a budget: spend is rebuilt from the SQL ledger at once (no wait).
 *
 * Store loss (Redis wiped, or restarted without persistence). SQL alone does not know what was
 * lost: the holds of calls in flight, and settles whose ledger rows are still in an instance's
 * buffer (written every second). Only the instances remember those, so none is written to SQL on
 * the request path; instead:
 * 1. The store carries an *epoch*. Every instance checks it every `epochCheckEveryMs`, and at once
 *    when a store answer says a budget is unseeded. Missing (and known to have existed: this
 *    instance saw one, or the `gateway_meta` witness says a store of this scope had one) → the
 *    store lost its state: the instance creates a new epoch with a *recovery fence*
 *    (now + `recoveryFenceMs`).
 * 2. An instance that finds a new epoch re-registers everything it remembers: its live holds
 *    (renewal registers a hold on an unseeded budget too) and its unwritten ledger rows, as
 *    pending charges keyed by ledger request id. Settles that land on an unseeded budget become
 *    pending charges the same way.
 * 3. Until the fence ends, a reservation on an unseeded budget waits (the request is delayed, not
 *    refused). Then one instance seeds: spent = the SQL ledger + the pending charges SQL does not
 *    have yet (looked up in the same statement, by id), and the holds registered meanwhile stay.
 *
 * Remaining window: an instance that cannot re-register before the fence ends (cut off from Redis
 * while the others reach it, or stalled longer than the fence) adds its holds late (at its next
 * renewal) and its rows from before the loss that were not in SQL yet are missed by the rebuild:
 * an overshoot of at most that instance's calls in flight and its last ~1 s of settles. A budget
 * key evicted while the epoch survives is not detected: run Redis with `noeviction`.
 */
import { Clock, Context, Deferred, Effect, FiberSet, Layer, Schedule } from "effect"
import { SqlClient } from "effect/sql"
import type { SqlError } from "effect/sql"
import type { Plan } from "../config/schema.ts"
import { Coordination } from "../coordination/coordination.ts"
import type { BudgetAnswer, BudgetReserveRequest, BudgetState, Epoch } from "../coordination/types.ts"
import { InvalidRequest, LimitExceeded, ServiceUnavailable } from "../errors.ts"
import { isPastDeadline, withinStorageDeadline } from "../storage/deadline.ts"
import { newId } from "../util/ids.ts"
import { coalescedRuns } from "../util/coalesced-runs.ts"
import { formatUsd, type Micros, usdToMicros } from "../model/money.ts"
import { monthOf, secondsUntilNextMonth } from "./month.ts"
import { type Funding, UsageLedger } from "./usage-ledger.ts"

export interface Reservation {
  readonly id: string
  /** The call's usage-ledger request id: its charge is applied once per this id. */
  readonly chargeId: string
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
  /** How often the store's epoch is checked: how soon a lost store is noticed. */
  readonly epochCheckEveryMs?: number
  /**
   * How long after a store loss unseeded budgets wait before they are rebuilt, so every live
   * instance can re-register its holds and charges first. Must exceed the epoch check interval
   * plus a Redis reconnection (ioredis retries at most every 2 s) plus a margin.
   */
  readonly recoveryFenceMs?: number
  /**
   * How long a budget's rebuild may wait on SQL before the reservation is refused with a 503 (the
   * rebuild itself is abandoned and tried again by the next reservation): a stalled database must
   * not hold requests without end.
   */
  readonly storageTimeoutMs?: number
}

export interface ReserveRequest {
  readonly keyId: string
  readonly plan: Plan
  readonly maxCostMicros: Micros
  /** The usage-ledger request id the call will be recorded under (default: the reservation id). */
  readonly requestId?: string | undefined
}

/**
 * A settle's outcome. `charged` is false when the charge id was already charged (a run step re-run
 * on another instance settled it first): that settle's usage must not go to the ledger.
 */
export interface Settled {
  readonly remaining: Micros | undefined
  readonly charged: boolean
  /**
   * What the key was charged under the call's charge id: by this settle, or by the one of the same
   * id that reached the store first. `undefined` when not known (the settle's answer was lost, or
   * the store kept no amount): the caller's own cost is the best estimate then.
   */
  readonly chargedMicros: Micros | undefined
}

export class Allowance extends Context.Service<Allowance, {
  reserve(request: ReserveRequest): Effect.Effect<Reservation, LimitExceeded | ServiceUnavailable>
  /**
   * The store command `reserve` sends, and how its answer becomes the reservation (`undefined`: an
   * unseeded budget — take `reserve`, which rebuilds it): for a caller that sends it together with
   * other commands (one round trip to a remote store).
   */
  prepareReserve(request: ReserveRequest, now: number): {
    readonly command: BudgetReserveRequest
    decide(answer: BudgetAnswer): Reservation | LimitExceeded | undefined
    /**
     * For a command whose answer never came (a timeout: it may still have run): lets its hold go,
     * so a retry under a new hold does not leave this one counted until it lapses. Never fails.
     */
    readonly abandon: Effect.Effect<void>
  }
  /**
   * The hot path's shortcut where the coordination store is in process: `reserve`, `settle` and
   * `release` answered synchronously. `reserve` answers `undefined` when it cannot (an unseeded
   * budget to rebuild): the caller then takes `reserve`. Absent on Redis.
   */
  readonly now?: {
    reserve(request: ReserveRequest, now: number): Reservation | LimitExceeded | undefined
    settle(reservation: Reservation, actualCostMicros: Micros, now: number): Settled
    release(reservation: Reservation, now: number): Micros | undefined
  } | undefined
  /**
   * Charges min(actual, reserved), once per charge id. Never fails; answers the remaining micros
   * when known, and whether this settle was the one that charged.
   */
  settle(reservation: Reservation, actualCostMicros: Micros): Effect.Effect<Settled>
  /** For calls that failed before producing output. Never fails. */
  release(reservation: Reservation): Effect.Effect<Micros | undefined>
  /** What is left to reserve: cap − spent − reserved, at least 0 (`xsvc-allowance-remaining`). */
  remaining(keyId: string, plan: Plan): Effect.Effect<Micros, ServiceUnavailable>
  /** Tops up a prepaid balance (durably in SQL first). Returns the new balance when known. */
  addCredits(keyId: string, amountUsd: number): Effect.Effect<{ grantId: string; balanceMicros: Micros | undefined }, InvalidRequest | SqlError.SqlError>
}>()("gateway/metering/Allowance") {
  static readonly layerWith = (options: AllowanceOptions) => Layer.effect(Allowance, make(options))
  static readonly layer = Allowance.layerWith({})
  /** Short holds and a short recovery fence, for tests that watch them lapse. */
  static readonly layerTest = Allowance.layerWith({ holdTtlMs: 1_000, renewEveryMs: 300, epochCheckEveryMs: 100, recoveryFenceMs: 600 })
}

const unavailable = (what: string) => () =>
  new ServiceUnavailable({ status: 503, message: `The allowance store is unavailable (${what}); try again shortly`, retryAfterSeconds: 1 })

const remainingOf = (state: BudgetState, cap: Micros | null) =>
  Math.max(0, (cap ?? state.granted) - state.spent - state.reserved)

/** The budget a call is charged to: the key's credits, or its allowance of the month it began in. */
const budgetOf = (keyId: string, funding: Funding, at: number) =>
  funding === "credits" ? `credits:${keyId}` : `allowance:${keyId}:${monthOf(at).label}`

function make(options: AllowanceOptions) {
  return Effect.gen(function*() {
    const store = yield* Coordination
    const ledger = yield* UsageLedger
    const sql = yield* SqlClient.SqlClient
    const holdTtlMs = options.holdTtlMs ?? 60_000
    const renewEveryMs = options.renewEveryMs ?? Math.max(100, Math.floor(holdTtlMs / 4))
    const maxHoldMs = options.maxHoldMs ?? 2 * 60 * 60_000
    const epochCheckEveryMs = options.epochCheckEveryMs ?? 1_000
    const recoveryFenceMs = options.recoveryFenceMs ?? 5_000
    const storageTimeoutMs = options.storageTimeoutMs ?? 10_000
    const live = new Map<string, Reservation>()
    const background = yield* FiberSet.make()
    const seeding = new Map<string, Deferred.Deferred<void, ServiceUnavailable>>()
    /** The store generation this instance's holds and charges are registered in. */
    let epoch: Epoch | undefined

    const target = (keyId: string, plan: Plan, now: number) => {
      if (plan.prepaid === true) {
        return { funding: "credits" as const, budget: budgetOf(keyId, "credits", now), cap: null, expireAt: 0, from: undefined, to: undefined }
      }
      const month = monthOf(now)
      // Kept a month past its end, then forgotten (SQL still has it).
      return {
        funding: "allowance" as const,
        budget: budgetOf(keyId, "allowance", now),
        cap: usdToMicros(plan.allowanceUsd),
        expireAt: month.end + 31 * 86_400_000,
        from: month.start,
        to: month.end
      }
    }
    type Target = ReturnType<typeof target>

    /** Holds to keep alive; a hold older than `maxHoldMs` is let go (a leaked reservation). */
    const heldAt = (now: number) => {
      const holds = []
      for (const r of live.values()) {
        if (now - r.at > maxHoldMs) live.delete(r.id)
        else holds.push({ budget: r.budget, id: r.id, amount: r.amountMicros })
      }
      return holds
    }

    /** Everything the store may have lost that this instance remembers: live holds, unwritten charges. */
    const registerAll = Effect.gen(function*() {
      const now = yield* Clock.currentTimeMillis
      yield* store.budgetRenew(heldAt(now), holdTtlMs, now)
      const unwritten = yield* ledger.unflushed
      yield* store.budgetCharge(unwritten.map((e) => ({
        budget: budgetOf(e.keyId, e.funding ?? "allowance", e.at.getTime()),
        id: e.requestId,
        amount: e.costMicros
      })), now)
    })

    /**
     * Did a store of this scope have an epoch before? Only then is a missing one a loss. An
     * in-process store lives and dies with this process: nobody else can have held anything in it.
     * The SQL witness is written once an epoch exists (`recordEpoch`), never before: written first,
     * an instance starting beside the one that wrote it could read the witness while the new
     * store's epoch is still missing, take it for a lost one and fence a brand-new store.
     */
    const witness = `coordination-epoch:${store.scope}`
    const hadEpochBefore = store.kind === "in-process" ? Effect.succeed(false) : Effect.map(
      sql`SELECT name FROM gateway_meta WHERE name = ${witness}`,
      (rows) => rows.length > 0
    )
    const recordEpoch = store.kind === "in-process" ? Effect.void : Effect.asVoid(
      sql`INSERT INTO gateway_meta (name, value) VALUES (${witness}, 'true'::jsonb) ON CONFLICT (name) DO NOTHING`
    )

    /**
     * Reads the store's epoch (creating it, fenced when the store lost its state); on a new one,
     * re-registers what this instance holds before adopting it. One at a time (`epochChecks`).
     */
    const checkEpoch = Effect.gen(function*() {
      let current = yield* store.epochRead()
      if (current === undefined) {
        const lost = epoch !== undefined || (yield* hadEpochBefore)
        const now = yield* Clock.currentTimeMillis
        current = yield* store.epochInit({ id: newId("epoch"), fenceUntil: lost ? now + recoveryFenceMs : 0 })
        if (lost) yield* Effect.logWarning(`allowance: the coordination store lost its state; budgets are rebuilt after a ${recoveryFenceMs} ms recovery fence`)
      }
      if (current.id !== epoch?.id) {
        // Adopted only once registered: a failure here is retried at the next check.
        yield* registerAll
        yield* recordEpoch
        epoch = current
      }
      return current
    })

    /**
     * The epoch checks, one at a time. After the store lost its state every settle and every
     * reserve finds its budget unseeded: the callers that come while a check runs share one check
     * after it (`coalescedRuns`) — it starts after they asked, so it sees what they saw — where
     * each queued on a lock for a store read of its own.
     */
    const epochChecks = coalescedRuns(checkEpoch, yield* Effect.scope)
    /** The store's epoch, as a check that started after this call read it. */
    const syncEpoch = epochChecks.fresh
    /** An answer said a budget is unseeded: check the epoch now rather than at the next tick. */
    const noticeUnseeded = epochChecks.ask

    /**
     * Rebuilds a budget from SQL plus its pending charges; concurrent callers for one budget share
     * one rebuild. A pending charge that arrives between the look-up and the seed makes the seed
     * stale: read again (the last try counts it, which may count it twice but never misses it).
     */
    const seed = (keyId: string, t: Target) => Effect.suspend(() => {
      const running = seeding.get(t.budget)
      if (running !== undefined) return Deferred.await(running)
      const done = Deferred.makeUnsafe<void, ServiceUnavailable>()
      seeding.set(t.budget, done)
      // On its own fiber, answering at the deadline (`storage/deadline.ts`) for every reservation
      // that waits on it, whatever its statement does after.
      runInBackground(withinStorageDeadline(storageTimeoutMs)(rebuild(keyId, t)).pipe(
        Effect.mapError((error) => (isPastDeadline(error) ? rebuildTimedOut : unavailable("rebuild"))()),
        Effect.onExit((exit) => {
          seeding.delete(t.budget)
          return Deferred.done(done, exit)
        })
      ))
      return Deferred.await(done)
    })
    const rebuildTimedOut = unavailable(`rebuild: the database gave no answer within ${storageTimeoutMs} ms`)
    const rebuild = Effect.fnUntraced(function*(keyId: string, t: Target) {
      for (let attempt = 0; ; attempt++) {
        const pending = yield* store.budgetPendingCharges(t.budget)
        const spent = yield* ledger.spentOn({ keyId, funding: t.funding, from: t.from, to: t.to, requestIds: pending })
        const grants = t.funding === "credits"
          ? yield* sql<{ id: string; amount: number }>`SELECT id, amount_micros::float8 AS amount FROM credit_grants WHERE key_id = ${keyId}`
          : []
        const counted = new Set(spent.counted)
        const answer = yield* store.budgetSeed({
          budget: t.budget,
          spent: spent.micros,
          granted: grants.reduce((sum, g) => sum + Number(g.amount), 0),
          grantIds: grants.map((g) => g.id),
          expireAt: t.expireAt,
          now: yield* Clock.currentTimeMillis,
          counted: spent.counted,
          uncounted: pending.filter((id) => !counted.has(id)),
          final: attempt >= 3
        })
        if (answer !== "Stale") return
      }
    })

    /** An unseeded budget: wait out a recovery fence if one is up, then rebuild it. */
    const recover = Effect.fnUntraced(function*(keyId: string, t: Target) {
      const current = yield* syncEpoch.pipe(Effect.mapError(unavailable("epoch")))
      const wait = current.fenceUntil - (yield* Clock.currentTimeMillis)
      // Bounded even if the fencing instance's clock runs ahead of ours.
      if (wait > 0) yield* Effect.sleep(Math.min(wait, 2 * recoveryFenceMs))
      yield* seed(keyId, t)
    })

    /** Runs an idempotent store write until it lands, off the caller's path. */
    const eventually = (what: string, effect: Effect.Effect<unknown, unknown>) =>
      FiberSet.run(background, effect.pipe(
        Effect.retry(Schedule.min([Schedule.exponential("200 millis"), Schedule.spaced("10 seconds")])),
        Effect.catch((error) => Effect.logError(`allowance: ${what} gave up`, error))
      )).pipe(Effect.asVoid)

    /** A reserve answer as the reservation (kept renewed) or the refusal. */
    const reserved = (request: ReserveRequest, t: Target, id: string, amount: number, now: number, state: BudgetState, refused: boolean): Reservation | LimitExceeded => {
      if (refused) {
        const left = formatUsd(remainingOf(state, t.cap))
        return t.funding === "credits"
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
        id, chargeId: request.requestId ?? id, keyId: request.keyId, funding: t.funding, budget: t.budget, amountMicros: amount,
        capMicros: t.cap, at: now, remainingMicros: remainingOf(state, t.cap)
      }
      live.set(id, reservation)
      return reservation
    }

    /**
     * A reserve that failed may still have run (its answer timed out, not its command): the hold is
     * let go, so it is not counted beside the next attempt's until it lapses (`holdTtlMs`). The
     * release goes out on the same connection after the reserve, so it runs after it; a hold that
     * never existed is only marked done (a late reserve of its id then takes nothing). Best effort.
     */
    const abandon = (budget: string, id: string) =>
      Effect.flatMap(Clock.currentTimeMillis, (now) => store.budgetRelease({ budget, id }, now)).pipe(Effect.ignore)

    const reserve = Effect.fnUntraced(function*(request: ReserveRequest) {
      const id = newId("res")
      const amount = Math.max(0, Math.ceil(request.maxCostMicros))
      for (let attempt = 0; attempt < 3; attempt++) {
        const now = yield* Clock.currentTimeMillis
        const t = target(request.keyId, request.plan, now)
        const answer = yield* store.budgetReserve({ budget: t.budget, cap: t.cap, amount, id, ttlMs: holdTtlMs, now, expireAt: t.expireAt })
          .pipe(Effect.tapError(() => Effect.sync(() => runInBackground(abandon(t.budget, id)))), Effect.mapError(unavailable("reserve")))
        if (answer._tag === "Unseeded") {
          yield* recover(request.keyId, t)
          continue
        }
        const result = reserved(request, t, id, amount, now, answer.state, answer._tag === "Refused")
        return result instanceof LimitExceeded ? yield* result : result
      }
      return yield* unavailable("rebuild did not take")()
    })

    /**
     * A settle: what is left once it landed (`undefined` when unknown), and whether it charged. A
     * settle that failed is retried until it lands — unless this instance meanwhile adopted a new epoch:
     * the store lost its state, and the charge is counted by the rebuild (from SQL, or re-registered
     * from the ledger buffer); applying it as well would count it twice.
     */
    const settle = Effect.fnUntraced(function*(reservation: Reservation, actualCostMicros: Micros) {
      live.delete(reservation.id)
      if (actualCostMicros > reservation.amountMicros) {
        yield* Effect.logWarning(`allowance: call ${reservation.id} cost ${actualCostMicros} µ$ but reserved ${reservation.amountMicros}; charged the reservation`)
      }
      const write = Effect.flatMap(Clock.currentTimeMillis, (now) =>
        store.budgetSettle({
          budget: reservation.budget, id: reservation.id, chargeId: reservation.chargeId,
          amount: reservation.amountMicros, actual: actualCostMicros, now
        }))
      const attemptedIn = epoch?.id
      const first = yield* Effect.result(write)
      if (first._tag === "Success") {
        const answer = first.success
        return { remaining: remainingAfter(reservation, answer.state), charged: answer.charged, chargedMicros: answer.chargedMicros }
      }
      yield* eventually(`settle ${reservation.id}`, Effect.suspend(() => (epoch?.id === attemptedIn ? Effect.asVoid(write) : Effect.void)))
      // Whether the retry will be the one that charges is not known: the call keeps its ledger row
      // (which a rebuild may need, see above).
      return { remaining: undefined, charged: true, chargedMicros: undefined }
    })

    const release = Effect.fnUntraced(function*(reservation: Reservation) {
      live.delete(reservation.id)
      // A release that never lands only keeps the hold until it lapses: nothing to retry for.
      const answer = yield* Effect.result(Effect.flatMap(Clock.currentTimeMillis, (now) =>
        store.budgetRelease({ budget: reservation.budget, id: reservation.id }, now)))
      return answer._tag === "Success" ? remainingAfter(reservation, answer.success) : undefined
    })

    const local = store.local
    const runInBackground = yield* FiberSet.makeRuntime<never>()
    const overcharged = (reservation: Reservation, actualCostMicros: Micros) => {
      if (actualCostMicros > reservation.amountMicros) {
        runInBackground(Effect.logWarning(`allowance: call ${reservation.id} cost ${actualCostMicros} µ$ but reserved ${reservation.amountMicros}; charged the reservation`))
      }
    }
    /** The store's state after a settle or release, as what is left; an unseeded budget is noticed. */
    const remainingAfter = (reservation: Reservation, state: BudgetState | undefined) => {
      if (state === undefined) {
        runInBackground(noticeUnseeded)
        return undefined
      }
      return remainingOf(state, reservation.capMicros)
    }
    const prepareReserve = (request: ReserveRequest, now: number) => {
      const id = newId("res")
      const amount = Math.max(0, Math.ceil(request.maxCostMicros))
      const t = target(request.keyId, request.plan, now)
      return {
        command: { budget: t.budget, cap: t.cap, amount, id, ttlMs: holdTtlMs, now, expireAt: t.expireAt },
        decide: (answer: BudgetAnswer) =>
          answer._tag === "Unseeded" ? undefined : reserved(request, t, id, amount, now, answer.state, answer._tag === "Refused"),
        abandon: abandon(t.budget, id)
      }
    }
    const now = local === undefined ? undefined : {
      reserve: (request: ReserveRequest, now: number) => {
        const { command, decide } = prepareReserve(request, now)
        return decide(local.budgetReserve(command))
      },
      settle: (reservation: Reservation, actualCostMicros: Micros, now: number) => {
        live.delete(reservation.id)
        overcharged(reservation, actualCostMicros)
        const answer = local.budgetSettle({
          budget: reservation.budget, id: reservation.id, chargeId: reservation.chargeId,
          amount: reservation.amountMicros, actual: actualCostMicros, now
        })
        return { remaining: remainingAfter(reservation, answer.state), charged: answer.charged, chargedMicros: answer.chargedMicros }
      },
      release: (reservation: Reservation, now: number) => {
        live.delete(reservation.id)
        return remainingAfter(reservation, local.budgetRelease({ budget: reservation.budget, id: reservation.id }, now))
      }
    }

    const remaining = Effect.fn("Allowance.remaining")(function*(keyId: string, plan: Plan) {
      const t = target(keyId, plan, yield* Clock.currentTimeMillis)
      const read = Effect.flatMap(Clock.currentTimeMillis, (now) => store.budgetState(t.budget, now)).pipe(Effect.mapError(unavailable("read")))
      let state = yield* read
      if (state === undefined) {
        yield* recover(keyId, t)
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
      const budget = budgetOf(keyId, "credits", 0)
      const grant = store.budgetGrant({ budget, grantId, amount })
      // Durable in SQL already; if the store is down the grant is applied once it is back.
      if ((yield* Effect.result(grant))._tag === "Failure") yield* eventually(`grant ${grantId}`, grant)
      const now = yield* Clock.currentTimeMillis
      const state = yield* store.budgetState(budget, now).pipe(Effect.orElseSucceed(() => undefined))
      return { grantId, balanceMicros: state === undefined ? undefined : remainingOf(state, null) }
    })

    // Watches the epoch (a lost store is noticed within `epochCheckEveryMs`) and keeps the holds of
    // running calls alive; whatever fails is simply tried again next round.
    let renewedAt = yield* Clock.currentTimeMillis
    // Once before the service is handed out, not only when the loop's fiber first runs: an instance
    // that has seen no epoch cannot tell a store that lost its state from a new one.
    yield* syncEpoch.pipe(Effect.ignore)
    yield* Effect.forkScoped(Effect.forever(Effect.gen(function*() {
      yield* syncEpoch.pipe(Effect.ignore)
      const now = yield* Clock.currentTimeMillis
      if (now - renewedAt >= renewEveryMs) {
        renewedAt = now
        yield* store.budgetRenew(heldAt(now), holdTtlMs, now).pipe(Effect.ignore)
      }
      yield* Effect.sleep(Math.min(epochCheckEveryMs, renewEveryMs))
    })))

    return Allowance.of({ reserve, prepareReserve, now, settle, release, remaining, addCredits })
  })
}
