/**
 * The primitives shared counters need, as data types. Two implementations honor them with the same
 * semantics: `in-process.ts` (one instance, plain maps) and `redis.ts` (many instances, Lua scripts,
 * one atomic step per operation).
 *
 * Time is always passed in by the caller (`now`, epoch ms from the Effect Clock) rather than read
 * by the store: tests drive both implementations with TestClock, and the few milliseconds of clock
 * skew between instances are harmless for minute windows, leases of seconds and months.
 */
import { Schema } from "effect"

/** The store could not be reached or answered badly. Callers decide to fail open or closed. */
export class CoordinationError extends Schema.TaggedError<CoordinationError>()("CoordinationError", {
  message: Schema.String
}) {}

// ---- rate gate: token buckets + a concurrency lease set, checked and taken all-or-nothing ----

/**
 * A token bucket holding at most `capacity` tokens that refills continuously, `capacity` per
 * `periodMs` (rpm: capacity = rpm, period = 60 s). A request takes `cost` tokens; a cost above
 * the capacity is clamped to it, so an oversized request passes only on a full bucket instead of
 * never (a `rate_limit_error` must be worth retrying). The store keeps what was *used* (draining
 * at capacity/period), so a changed capacity (a plan change) applies at the next request.
 */
interface BucketSpec {
  readonly name: string
  readonly capacity: number
  readonly periodMs: number
  readonly cost: number
}

export interface BucketState {
  readonly name: string
  readonly capacity: number
  /** Whole tokens left after this request (or now, when refused). */
  readonly remaining: number
  /** Until the bucket is full again. */
  readonly resetMs: number
  /** 0 when this bucket had room; otherwise until it will have room for this cost. */
  readonly retryAfterMs: number
}

/** A concurrency slot that lapses at `now + ttlMs` unless renewed: a dead instance frees its slots. */
interface LeaseSpec {
  readonly limit: number
  readonly id: string
  readonly ttlMs: number
}

export interface GateRequest {
  /** Everything of one gate (e.g. one API key) lives under this scope. */
  readonly scope: string
  readonly buckets: ReadonlyArray<BucketSpec>
  readonly lease?: LeaseSpec | undefined
  readonly now: number
}

export interface GateResult {
  readonly admitted: boolean
  readonly buckets: ReadonlyArray<BucketState>
  /** Leases held in the scope after this call (this one included when admitted); 0 when it asked for none. */
  readonly leasesInUse: number
  /** True when the concurrency limit (not a bucket) refused the request. */
  readonly leaseRefused: boolean
}

export interface LeaseRef {
  readonly scope: string
  readonly id: string
}

// ---- budgets: a hard cap with reservations ----

/**
 * One spending pool (a key's allowance for one month, or a key's prepaid credits), in micros.
 * A reservation holds `amount` against the cap until it is settled (turned into spend) or
 * released; reservations also lapse after their ttl unless renewed, so a dead instance's
 * reservations return to the pool.
 *
 * A budget starts *unseeded* (the store is empty: first use, a Redis wipe or restart): it knows no
 * `spent`, so `budgetReserve` and `budgetState` answer `Unseeded` and the caller rebuilds `spent`
 * from SQL with `budgetSeed`. An unseeded budget still takes what only the instances remember:
 * the holds of calls in flight (`budgetRenew`) and charges whose ledger rows may not be in SQL yet
 * (*pending charges*: settles that land while unseeded, and `budgetCharge`). `budgetSeed` keeps the
 * holds and adds the pending charges SQL does not have yet.
 */
export interface BudgetState {
  readonly spent: number
  readonly reserved: number
  /** Credits granted (prepaid budgets); 0 for allowances. */
  readonly granted: number
}

export type BudgetAnswer =
  | { readonly _tag: "Unseeded" }
  | { readonly _tag: "Reserved"; readonly state: BudgetState }
  | { readonly _tag: "Refused"; readonly state: BudgetState }

export interface BudgetReserveRequest {
  readonly budget: string
  /** The hard cap; `null` uses the budget's `granted` credits as the cap. */
  readonly cap: number | null
  readonly amount: number
  readonly id: string
  readonly ttlMs: number
  readonly now: number
  /** When the whole budget may be forgotten (epoch ms; 0 = never). */
  readonly expireAt: number
}

/**
 * A settle's answer: the budget after it (`undefined`: unseeded) and whether this settle applied
 * the charge. A charge id is charged once, by whichever settle reaches the store first (a run step
 * re-run after a takeover settles the same id twice, from two instances); only that settle's usage
 * may go to the ledger, or the ledger and the live allowance would each keep a different one.
 */
export interface SettleAnswer {
  readonly state: BudgetState | undefined
  readonly charged: boolean
  /**
   * What the charge id was charged, by this settle or by the one that reached the store first:
   * so a step re-run after a takeover reports the charge the key really bore, whichever settle
   * made it. `undefined` when the store does not know the amount (the id was marked by an older
   * version that kept no amount).
   */
  readonly chargedMicros: number | undefined
}

export interface BudgetSettleRequest {
  readonly budget: string
  /** The reservation (hold) id. */
  readonly id: string
  /**
   * The charge's id: the call's usage-ledger request id. A charge is applied once per id, however
   * it arrives (this settle, its retry, or `budgetCharge` after a wipe).
   */
  readonly chargeId: string
  /** What was reserved: the ceiling of the charge. */
  readonly amount: number
  readonly actual: number
  readonly now: number
}

export interface BudgetHold {
  readonly budget: string
  readonly id: string
  readonly amount: number
}

/** A charge whose ledger row may not be in SQL yet; `id` is the ledger request id. */
export interface BudgetCharge {
  readonly budget: string
  readonly id: string
  readonly amount: number
}

export interface BudgetSeed {
  readonly budget: string
  /** Spend from SQL (and the seeding instance's unwritten ledger rows). */
  readonly spent: number
  readonly granted: number
  /** Credit grants already counted in `granted`, so `budgetGrant` never applies one twice. */
  readonly grantIds: ReadonlyArray<string>
  readonly expireAt: number
  readonly now: number
  /**
   * The pending charges (`budgetPendingCharges`) the caller looked up in the same SQL read as
   * `spent`: `counted` are already in `spent`, `uncounted` are not (the seed adds them).
   */
  readonly counted: ReadonlyArray<string>
  readonly uncounted: ReadonlyArray<string>
  /**
   * A pending charge in neither list arrived after the caller's look-up: `Stale` (read again),
   * unless `final`, which adds it (counting a charge twice is safe; missing one is not).
   */
  readonly final: boolean
}

export type SeedAnswer = "Seeded" | "Exists" | "Stale"

/**
 * The store's generation. A new store (first start, a wipe, a restart without persistence) has
 * none; the first instance to look creates one. An instance that finds a different one than it
 * knew, or none, knows the store lost what it held. `fenceUntil` (epoch ms, 0 = none): until then
 * unseeded budgets are not seeded, so every live instance can register its holds and charges first.
 */
export interface Epoch {
  readonly id: string
  readonly fenceUntil: number
}

/** How long a settled or released reservation id is remembered, so a retried settle is a no-op. */
export const SETTLED_MEMORY_MS = 10 * 60_000

/** Prefix shared by every key the Redis store writes (tests clean up by it). */
export const KEY_PREFIX = "gw:"
