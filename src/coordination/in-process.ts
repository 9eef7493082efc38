/**
 * The in-process store: plain maps, for one instance without Redis. Every operation runs
 * synchronously inside one `Effect.sync`, so it is atomic the same way a Lua script is on Redis;
 * the arithmetic mirrors `lua.ts` line for line (the shared test suite runs against both).
 */
import { Effect } from "effect"
import type { CoordinationShape, LocalCounters } from "./coordination.ts"
import {
  type BucketState,
  type BudgetAnswer,
  type BudgetState,
  type Epoch,
  SETTLED_MEMORY_MS
} from "./types.ts"
import { makeRememberedIds, type RememberedIds } from "./remembered-ids.ts"

/** A rate window's level: `used` at `ts`, draining to nothing by `emptyAt`. */
interface Bucket { used: number; ts: number; emptyAt: number }
interface Scope { readonly buckets: Map<string, Bucket>; readonly leases: Map<string, number> }

/** An active reservation: `amount` counted in `reserved` until it is settled, released or lapses. */
interface Hold { readonly amount: number; expiresAt: number }
interface Budget {
  /** `undefined`: unseeded (only holds and pending charges registered since the store lost it). */
  spent: number | undefined
  reserved: number
  granted: number
  grants: Set<string>
  /** Active holds (a few: the calls in flight). */
  readonly holds: Map<string, Hold>
  /** Charges that landed while unseeded: ledger request id → micros, for the seed. */
  readonly pending: Map<string, number>
  expireAt: number
  /** The earliest `expiresAt` among the active holds (or earlier): none lapses before it. */
  nextLapse: number
  /**
   * Settled or released hold ids (`HOLD_DONE`) and applied charge ids (what each charged),
   * remembered for `SETTLED_MEMORY_MS`: ~240,000 at 200 calls a second (`remembered-ids.ts`).
   */
  readonly done: RememberedIds
}

/** Scopes `gate` looks at for having gone idle (`dropIdleScopes`). */
const IDLE_SCOPES_PER_GATE = 2

/** `Budget.done`'s value for a finished hold (an applied charge's is what it charged, ≥ 0). */
const HOLD_DONE = -1

/** Whether `id` was settled, released or charged (and is still remembered). */
const isDone = (budget: Budget, id: string) => budget.done.get(id) !== undefined

/**
 * Up to the next whole ms, forgiving float noise (2.95 + 1 - 3 is 0.9500000000000002); never
 * negative (ceil(-1e-6) is -0, which Redis answers as 0).
 */
const ceilMs = (ms: number) => Math.max(0, Math.ceil(ms - 1e-6))

/** The in-process store, plus for tests `wipe` (what FLUSHALL does to Redis) and its count of keys' scopes. */
export interface InProcessStore extends CoordinationShape {
  wipe(): void
  scopeCount(): number
}

export const makeInProcess = (): InProcessStore => {
  const scopes = new Map<string, Scope>()
  const budgets = new Map<string, Budget>()
  let epoch: Epoch | undefined

  const scopeOf = (name: string) => {
    let scope = scopes.get(name)
    if (scope === undefined) {
      scope = { buckets: new Map(), leases: new Map() }
      scopes.set(name, scope)
    }
    return scope
  }
  const purgeLeases = (scope: Scope, now: number) => {
    for (const [id, expiresAt] of scope.leases) if (expiresAt <= now) scope.leases.delete(id)
  }
  /**
   * Drops the scopes (one per key) whose windows have drained and that hold no lease — the same as
   * absent to every gate — a few per gate, in turn: a gateway that has served many keys keeps only
   * the recently active ones (Redis lets such keys expire).
   */
  let sweeping: Iterator<[string, Scope]> | undefined
  const dropIdleScopes = (now: number) => {
    for (let looked = 0; looked < IDLE_SCOPES_PER_GATE; looked++) {
      sweeping ??= scopes.entries()
      const next = sweeping.next()
      if (next.done === true) {
        sweeping = undefined
        return
      }
      const [name, scope] = next.value
      purgeLeases(scope, now)
      if (scope.leases.size > 0) continue
      let drained = true
      for (const bucket of scope.buckets.values()) drained &&= bucket.emptyAt <= now
      if (drained) scopes.delete(name)
    }
  }

  /** The budget's record, swept of lapsed holds; undefined when absent (or past its expiry). */
  const live = (name: string, now: number): Budget | undefined => {
    const budget = budgets.get(name)
    if (budget === undefined) return undefined
    if (budget.expireAt > 0 && budget.expireAt <= now) {
      budgets.delete(name)
      return undefined
    }
    // Settled ids are remembered for minutes (hundreds of thousands at a high rate): only the
    // expired ones are popped, so a long-lived budget costs O(1) per operation.
    budget.done.expire(now)
    if (now < budget.nextLapse) return budget
    let nextLapse = Infinity
    for (const [id, hold] of budget.holds) {
      if (hold.expiresAt > now) {
        nextLapse = Math.min(nextLapse, hold.expiresAt)
        continue
      }
      budget.reserved -= hold.amount
      budget.holds.delete(id)
    }
    budget.nextLapse = nextLapse
    return budget
  }
  /** Counts a hold active until `expiresAt` (a new one, or a renewal). */
  const holdFor = (budget: Budget, id: string, amount: number, expiresAt: number) => {
    budget.holds.set(id, { amount, expiresAt })
    budget.nextLapse = Math.min(budget.nextLapse, expiresAt)
  }
  /**
   * Remembers a settled or released hold id (`HOLD_DONE`), or an applied charge id with what it
   * charged; no longer active. The caller has looked it up and knows it is not remembered yet.
   */
  const remember = (budget: Budget, id: string, now: number, charge: number) => {
    budget.holds.delete(id)
    budget.done.add(id, charge, now + SETTLED_MEMORY_MS)
  }
  /** A seeded budget, or undefined (absent, expired or unseeded). */
  const seeded = (name: string, now: number): (Budget & { spent: number }) | undefined => {
    const budget = live(name, now)
    return budget?.spent === undefined ? undefined : budget as Budget & { spent: number }
  }
  /**
   * The record writes go to, created unseeded when absent. An unseeded record is kept for
   * `SETTLED_MEMORY_MS` after its last write (a seed normally follows within seconds).
   */
  const record = (name: string, now: number): Budget => {
    let budget = live(name, now)
    if (budget === undefined) {
      budget = {
        spent: undefined, reserved: 0, granted: 0, grants: new Set(), holds: new Map(), pending: new Map(), expireAt: 0,
        nextLapse: Infinity, done: makeRememberedIds()
      }
      budgets.set(name, budget)
    }
    if (budget.spent === undefined) budget.expireAt = now + SETTLED_MEMORY_MS
    return budget
  }
  const stateOf = (b: Budget & { spent: number }): BudgetState => ({ spent: b.spent, reserved: b.reserved, granted: b.granted })
  /**
   * Settle or release: the hold leaves `reserved`; a settle charges once per charge id. Answers
   * whether this call applied the charge, and what the charge id was charged (by this call or the
   * one before it).
   */
  const close = (budget: Budget, holdId: string, now: number, charge?: { id: string; amount: number }) => {
    // Read before the hold is marked: the two ids may be one.
    const prior = charge === undefined ? undefined : budget.done.get(charge.id)
    const chargedBefore = prior === undefined || prior === HOLD_DONE ? undefined : prior
    if (isDone(budget, holdId)) return { charged: false, chargedMicros: chargedBefore }
    const held = budget.holds.get(holdId)
    if (held !== undefined) budget.reserved -= held.amount
    const charges = charge !== undefined && prior === undefined
    // A hold whose id is its charge's id is remembered once, as the charge (with its amount).
    if (!charges || charge.id !== holdId) remember(budget, holdId, now, HOLD_DONE)
    if (!charges) return { charged: false, chargedMicros: chargedBefore }
    if (budget.spent === undefined) budget.pending.set(charge.id, charge.amount)
    else budget.spent += charge.amount
    remember(budget, charge.id, now, charge.amount)
    return { charged: true, chargedMicros: charge.amount }
  }
  const stateAfter = (budget: Budget) => budget.spent === undefined ? undefined : stateOf(budget as Budget & { spent: number })

  const local: LocalCounters = {
    gate: (request) => {
      const { now } = request
      dropIdleScopes(now)
      const scope = scopeOf(request.scope)
      // A bucket stores what was used (draining at capacity/period), not what is left, so a plan
      // change applies at once: a larger limit gives its extra room immediately.
      const levels = request.buckets.map((spec) => {
        const cost = Math.min(spec.cost, spec.capacity)
        const stored = scope.buckets.get(spec.name)
        const used = stored === undefined
          ? 0
          : Math.max(0, stored.used - Math.max(0, now - stored.ts) * spec.capacity / spec.periodMs)
        return { spec, cost, used }
      })
      let admitted = levels.every(({ spec, cost, used }) => used + cost <= spec.capacity + 1e-9)
      let leaseRefused = false
      if (request.lease !== undefined) {
        purgeLeases(scope, now)
        if (!scope.leases.has(request.lease.id) && scope.leases.size >= request.lease.limit) {
          leaseRefused = true
          admitted = false
        }
        if (admitted) scope.leases.set(request.lease.id, now + request.lease.ttlMs)
      }
      const buckets = levels.map(({ spec, cost, used }): BucketState => {
        const after = admitted ? used + cost : used
        if (admitted) scope.buckets.set(spec.name, { used: after, ts: now, emptyAt: now + after * spec.periodMs / spec.capacity })
        const over = used + cost - spec.capacity
        return {
          name: spec.name,
          capacity: spec.capacity,
          remaining: Math.max(0, Math.floor(spec.capacity - after + 1e-9)),
          resetMs: ceilMs(after * spec.periodMs / spec.capacity),
          retryAfterMs: !admitted && over > 1e-9 ? ceilMs(over * spec.periodMs / spec.capacity) : 0
        }
      })
      return { admitted, buckets, leasesInUse: request.lease === undefined ? 0 : scope.leases.size, leaseRefused }
    },

    releaseLease: (lease) => {
      scopes.get(lease.scope)?.leases.delete(lease.id)
    },

    budgetReserve: (request): BudgetAnswer => {
      const budget = seeded(request.budget, request.now)
      if (budget === undefined) return { _tag: "Unseeded" }
      if (budget.holds.has(request.id) || isDone(budget, request.id)) return { _tag: "Reserved", state: stateOf(budget) }
      const cap = request.cap ?? budget.granted
      // At least one micro must remain: a budget at zero refuses even a free call ("hard stop at zero").
      if (budget.spent + budget.reserved + Math.max(request.amount, 1) > cap) {
        return { _tag: "Refused", state: stateOf(budget) }
      }
      budget.reserved += request.amount
      holdFor(budget, request.id, request.amount, request.now + request.ttlMs)
      if (request.expireAt > 0) budget.expireAt = request.expireAt
      return { _tag: "Reserved", state: stateOf(budget) }
    },

    // Charge at most what was reserved; a missing hold (lapsed, or the store was rebuilt) still charges.
    budgetSettle: (request) => {
      const budget = record(request.budget, request.now)
      const { charged, chargedMicros } = close(budget, request.id, request.now, { id: request.chargeId, amount: Math.max(0, Math.min(request.actual, request.amount)) })
      return { state: stateAfter(budget), charged, chargedMicros }
    },

    budgetRelease: (hold, now) => {
      const budget = record(hold.budget, now)
      close(budget, hold.id, now)
      return stateAfter(budget)
    }
  }

  return {
    kind: "in-process",
    scope: "in-process",
    local,
    gate: (request) => Effect.sync(() => local.gate(request)),
    releaseLease: (lease) => Effect.sync(() => local.releaseLease(lease)),

    renewLeases: (leases, ttlMs, now) => Effect.sync(() => {
      for (const lease of leases) {
        const held = scopes.get(lease.scope)?.leases
        // Only a lease still held is extended: a lapsed one is not brought back.
        if (held?.has(lease.id) === true) held.set(lease.id, now + ttlMs)
      }
    }),

    budgetReserve: (request) => Effect.sync(() => local.budgetReserve(request)),
    budgetSettle: (request) => Effect.sync(() => local.budgetSettle(request)),
    budgetRelease: (hold, now) => Effect.sync(() => local.budgetRelease(hold, now)),

    budgetRenew: (holds, ttlMs, now) => Effect.sync(() => {
      for (const hold of holds) {
        const budget = record(hold.budget, now)
        if (isDone(budget, hold.id)) continue
        const held = budget.holds.get(hold.id)
        // A hold that lapsed (or was lost with the store) belongs to a call still running: count it again.
        if (held === undefined) budget.reserved += hold.amount
        // A hold still there keeps the amount it was counted with (what `reserved` holds for it).
        holdFor(budget, hold.id, held?.amount ?? hold.amount, now + ttlMs)
      }
    }),

    budgetCharge: (charges, now) => Effect.sync(() => {
      for (const charge of charges) {
        if (seeded(charge.budget, now) !== undefined) continue
        const budget = record(charge.budget, now)
        if (isDone(budget, charge.id)) continue
        budget.pending.set(charge.id, charge.amount)
        remember(budget, charge.id, now, charge.amount)
      }
    }),

    budgetPendingCharges: (name) => Effect.sync(() => {
      const budget = budgets.get(name)
      return budget === undefined || budget.spent !== undefined ? [] : [...budget.pending.keys()]
    }),

    budgetSeed: (seed) => Effect.sync(() => {
      const budget = live(seed.budget, seed.now)
      if (budget?.spent !== undefined) return "Exists" as const
      const counted = new Set(seed.counted)
      const uncounted = new Set(seed.uncounted)
      let spent = seed.spent
      for (const [id, amount] of budget?.pending ?? []) {
        if (counted.has(id)) continue
        if (!uncounted.has(id) && !seed.final) return "Stale" as const
        spent += amount
      }
      const next = budget ?? record(seed.budget, seed.now)
      // Holds registered while unseeded stay; `reserved` is recounted from them.
      let reserved = 0
      for (const held of next.holds.values()) reserved += held.amount
      next.spent = spent
      next.reserved = reserved
      next.granted = seed.granted
      next.grants = new Set(seed.grantIds)
      next.pending.clear()
      next.expireAt = seed.expireAt
      return "Seeded" as const
    }),

    budgetGrant: (grant) => Effect.sync(() => {
      const budget = budgets.get(grant.budget)
      if (budget?.spent === undefined || budget.grants.has(grant.grantId)) return false
      budget.grants.add(grant.grantId)
      budget.granted += grant.amount
      return true
    }),

    budgetState: (name, now) => Effect.sync(() => {
      const budget = seeded(name, now)
      return budget === undefined ? undefined : stateOf(budget)
    }),

    epochRead: () => Effect.sync(() => epoch),

    epochInit: (candidate) => Effect.sync(() => {
      epoch ??= candidate
      return epoch
    }),

    scopeCount: () => scopes.size,
    wipe: () => {
      scopes.clear()
      sweeping = undefined
      budgets.clear()
      epoch = undefined
    }
  }
}
