/**
 * The pluggable store for counters shared by every instance: rate buckets, concurrency leases and
 * budgets with reservations. `REDIS_URL` set → Redis (atomic Lua scripts, shared by instances);
 * absent → the same operations on in-process maps.
 *
 * Failure policy lives with the callers, which know what is at stake (see metering/):
 *  - rate limits FAIL OPEN when the store errors: a short Redis outage must not stop traffic;
 *  - budget reservations FAIL CLOSED: the allowance must never overshoot, so no store, no call;
 *  - settles are retried in the background and are idempotent (a settled id is remembered);
 *  - a store that lost its state (a new or missing `Epoch`) is rebuilt behind a recovery fence
 *    while instances re-register what they hold (metering/allowance.ts).
 */
import { Context, Effect, Layer } from "effect"
import { Settings } from "../config/settings.ts"
import { makeInProcess } from "./in-process.ts"
import { makeRedis } from "./redis.ts"
import { RedisClient, type RedisClientOptions } from "./redis-client.ts"
import type {
  BudgetAnswer,
  BudgetCharge,
  BudgetHold,
  BudgetReserveRequest,
  BudgetSeed,
  BudgetSettleRequest,
  BudgetState,
  CoordinationError,
  Epoch,
  GateRequest,
  GateResult,
  LeaseRef,
  SeedAnswer,
  SettleAnswer
} from "./types.ts"

/**
 * The operations the request path takes on every call, answered synchronously — offered by a
 * store that lives in this process, so a call is metered without an Effect per step. Same
 * semantics as the Effect versions (which the in-process store builds from these).
 */
export interface LocalCounters {
  gate(request: GateRequest): GateResult
  releaseLease(lease: LeaseRef): void
  budgetReserve(request: BudgetReserveRequest): BudgetAnswer
  budgetSettle(request: BudgetSettleRequest): SettleAnswer
  budgetRelease(hold: { readonly budget: string; readonly id: string }, now: number): BudgetState | undefined
}

export interface CoordinationShape {
  readonly kind: "in-process" | "redis"
  /** The hot operations, synchronous: present when the store is in process (absent on Redis). */
  readonly local?: LocalCounters | undefined
  /** What tells this store's state apart from another's in one database (Redis: the key prefix). */
  readonly scope: string
  /** Checks every bucket and the lease limit; takes all of them, or none. */
  gate(request: GateRequest): Effect.Effect<GateResult, CoordinationError>
  /**
   * Gives a lease back without waiting for the store (a remote store sends it and moves on): a
   * release that is lost leaves the lease to lapse by its TTL. Never fails.
   */
  releaseLease(lease: LeaseRef): Effect.Effect<void>
  /** Extends leases still held; a lease that already lapsed stays lapsed. */
  renewLeases(leases: ReadonlyArray<LeaseRef>, ttlMs: number, now: number): Effect.Effect<void, CoordinationError>

  /** Holds `amount` unless spent + reserved + max(amount, 1) would pass the cap. Idempotent per id. */
  budgetReserve(request: BudgetReserveRequest): Effect.Effect<BudgetAnswer, CoordinationError>
  /**
   * `gate` and `budgetReserve` in one round trip (each atomic on its own, both applied): a remote
   * store's admission path. The caller undoes the one that succeeded when the other refused.
   * Absent where round trips cost nothing (in process: see `local`). With a `ticket` (an id unique
   * to the call), an admitted call (both took) leaves the admission ticket the capacity queue's
   * enqueue sent right behind it takes (`AcquireOptions.admission`).
   */
  readonly gateAndReserve?:
    | ((gate: GateRequest, reserve: BudgetReserveRequest, ticket?: string) => Effect.Effect<readonly [GateResult, BudgetAnswer], CoordinationError>)
    | undefined
  /**
   * Turns a hold into spend of min(actual, amount). Idempotent per hold id and per charge id. A hold
   * that is gone (lapsed or lost with the store) is still charged. On an unseeded budget the charge
   * is kept as a pending charge for the next seed, and the answer's state is `undefined`.
   */
  budgetSettle(request: BudgetSettleRequest): Effect.Effect<SettleAnswer, CoordinationError>
  /** Returns a hold to the pool without spend. Idempotent per id. `undefined`: unseeded. */
  budgetRelease(hold: { readonly budget: string; readonly id: string }, now: number): Effect.Effect<BudgetState | undefined, CoordinationError>
  /**
   * Keeps the holds of running calls alive; a hold that lapsed or was lost is counted again — on an
   * unseeded budget too, where the seed keeps it. A finished id is never brought back.
   */
  budgetRenew(holds: ReadonlyArray<BudgetHold>, ttlMs: number, now: number): Effect.Effect<void, CoordinationError>
  /**
   * Registers charges of calls already settled whose ledger rows may not be in SQL (after a wipe),
   * as pending charges of unseeded budgets. A seeded budget, or a charge id already applied, is
   * left alone.
   */
  budgetCharge(charges: ReadonlyArray<BudgetCharge>, now: number): Effect.Effect<void, CoordinationError>
  /** Ids of the pending charges of an (unseeded) budget, to look up in SQL before seeding. */
  budgetPendingCharges(budget: string): Effect.Effect<ReadonlyArray<string>, CoordinationError>
  /**
   * Gives an unseeded budget its spend: `spent` + the pending charges SQL did not count; keeps the
   * holds registered while unseeded. `Exists` when it was seeded already.
   */
  budgetSeed(seed: BudgetSeed): Effect.Effect<SeedAnswer, CoordinationError>
  /** Adds a credit grant once (by id) to a seeded budget; an unseeded one reads it from SQL later. */
  budgetGrant(grant: { readonly budget: string; readonly grantId: string; readonly amount: number }): Effect.Effect<boolean, CoordinationError>
  budgetState(budget: string, now: number): Effect.Effect<BudgetState | undefined, CoordinationError>

  /** The store's generation (see `Epoch`); `undefined` when it has none (new, wiped, restarted). */
  epochRead(): Effect.Effect<Epoch | undefined, CoordinationError>
  /** Creates the epoch unless one exists; answers the one in force (another instance's may have won). */
  epochInit(epoch: Epoch): Effect.Effect<Epoch, CoordinationError>
}

export class Coordination extends Context.Service<Coordination, CoordinationShape>()("gateway/coordination/Coordination") {
  /** In-process maps: one instance, nothing shared. */
  static readonly layerInProcess = Layer.sync(Coordination, () => makeInProcess())
  /** Redis, on the RedisClient of the context (shared with the other users of Redis). */
  static readonly layerOnRedisClient = Layer.effect(Coordination, makeRedis)
  /** Redis at `url` on a client of its own, which closes with the layer. */
  static readonly layerRedis = (url: string, options?: Omit<RedisClientOptions, "url">) =>
    Coordination.layerOnRedisClient.pipe(Layer.provide(RedisClient.layer({ url, ...options })))
  /** Redis when `REDIS_URL` is set (the gateway's shared client), in-process otherwise. */
  static readonly layer = Layer.unwrap(Effect.gen(function*() {
    const { redisUrl } = yield* Settings
    return redisUrl === undefined
      ? Coordination.layerInProcess
      : Coordination.layerOnRedisClient.pipe(Layer.provide(RedisClient.layerFromSettings))
  }))
  static readonly layerTest = Coordination.layerInProcess
}
