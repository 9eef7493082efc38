/**
 * The in-process store: plain maps, for one instance without Redis. Every operation runs
 * synchronously inside one `Effect.sync`, so it is atomic the same way a Lua script is on Redis;
 * the arithmetic mirrors `lua.ts` line for line (the shared test suite runs against both).
 */
import { Effect } from "effect"
import type { CoordinationShape } from "./coordination.ts"
import {
  type BucketState,
  type BudgetAnswer,
  type BudgetState,
  SETTLED_MEMORY_MS
} from "./types.ts"

interface Bucket { used: number; ts: number }
interface Scope { readonly buckets: Map<string, Bucket>; readonly leases: Map<string, number> }

/** A reservation: `amount` while active, `"done"` once settled or released (remembered briefly). */
interface Hold { value: number | "done"; expiresAt: number }
interface Budget {
  spent: number
  reserved: number
  granted: number
  readonly grants: Set<string>
  readonly holds: Map<string, Hold>
  expireAt: number
  /** The earliest `expiresAt` among the holds (or earlier): nothing lapses before it. */
  nextLapse: number
}

/** Up to the next whole ms, forgiving float noise (2.95 + 1 - 3 is 0.9500000000000002). */
const ceilMs = (ms: number) => Math.ceil(ms - 1e-6)

export const makeInProcess = (): CoordinationShape => {
  const scopes = new Map<string, Scope>()
  const budgets = new Map<string, Budget>()

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

  /** The live budget, swept of lapsed holds; undefined when unseeded (or past its expiry). */
  const live = (name: string, now: number): Budget | undefined => {
    const budget = budgets.get(name)
    if (budget === undefined) return undefined
    if (budget.expireAt > 0 && budget.expireAt <= now) {
      budgets.delete(name)
      return undefined
    }
    // Sweeping is O(holds), and settled ids are remembered for minutes (hundreds of thousands at
    // a high rate): only sweep once something can have lapsed.
    if (now < budget.nextLapse) return budget
    let nextLapse = Infinity
    for (const [id, hold] of budget.holds) {
      if (hold.expiresAt > now) {
        nextLapse = Math.min(nextLapse, hold.expiresAt)
        continue
      }
      if (hold.value !== "done") budget.reserved -= hold.value
      budget.holds.delete(id)
    }
    budget.nextLapse = nextLapse
    return budget
  }
  const setHold = (budget: Budget, id: string, hold: Hold) => {
    budget.holds.set(id, hold)
    budget.nextLapse = Math.min(budget.nextLapse, hold.expiresAt)
  }
  const stateOf = (b: Budget): BudgetState => ({ spent: b.spent, reserved: b.reserved, granted: b.granted })
  const finish = (budget: Budget, id: string, now: number) => setHold(budget, id, { value: "done", expiresAt: now + SETTLED_MEMORY_MS })

  return {
    kind: "in-process",

    gate: (request) => Effect.sync(() => {
      const scope = scopeOf(request.scope)
      const { now } = request
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
        if (admitted) scope.buckets.set(spec.name, { used: after, ts: now })
        const over = used + cost - spec.capacity
        return {
          name: spec.name,
          capacity: spec.capacity,
          remaining: Math.max(0, Math.floor(spec.capacity - after + 1e-9)),
          resetMs: ceilMs(after * spec.periodMs / spec.capacity),
          retryAfterMs: !admitted && over > 1e-9 ? ceilMs(over * spec.periodMs / spec.capacity) : 0
        }
      })
      return { admitted, buckets, leasesInUse: scope.leases.size, leaseRefused }
    }),

    releaseLease: (lease) => Effect.sync(() => {
      scopes.get(lease.scope)?.leases.delete(lease.id)
    }),

    renewLeases: (leases, ttlMs, now) => Effect.sync(() => {
      for (const lease of leases) {
        const held = scopes.get(lease.scope)?.leases
        // Only a lease still held is extended: a lapsed one is not brought back.
        if (held?.has(lease.id) === true) held.set(lease.id, now + ttlMs)
      }
    }),

    budgetReserve: (request) => Effect.sync((): BudgetAnswer => {
      const budget = live(request.budget, request.now)
      if (budget === undefined) return { _tag: "Unseeded" }
      if (budget.holds.has(request.id)) return { _tag: "Reserved", state: stateOf(budget) }
      const cap = request.cap ?? budget.granted
      // At least one micro must remain: a budget at zero refuses even a free call ("hard stop at zero").
      if (budget.spent + budget.reserved + Math.max(request.amount, 1) > cap) {
        return { _tag: "Refused", state: stateOf(budget) }
      }
      budget.reserved += request.amount
      setHold(budget, request.id, { value: request.amount, expiresAt: request.now + request.ttlMs })
      if (request.expireAt > 0) budget.expireAt = request.expireAt
      return { _tag: "Reserved", state: stateOf(budget) }
    }),

    budgetSettle: (request) => Effect.sync(() => {
      const budget = live(request.budget, request.now)
      if (budget === undefined) return undefined
      const hold = budget.holds.get(request.id)
      if (hold?.value === "done") return stateOf(budget)
      if (hold !== undefined) budget.reserved -= hold.value
      // Charge at most what was reserved; a missing hold (lapsed, or the store was rebuilt) still charges.
      budget.spent += Math.max(0, Math.min(request.actual, request.amount))
      finish(budget, request.id, request.now)
      return stateOf(budget)
    }),

    budgetRelease: (hold, now) => Effect.sync(() => {
      const budget = live(hold.budget, now)
      if (budget === undefined) return undefined
      const held = budget.holds.get(hold.id)
      if (held?.value === "done") return stateOf(budget)
      if (held !== undefined) budget.reserved -= held.value
      finish(budget, hold.id, now)
      return stateOf(budget)
    }),

    budgetRenew: (holds, ttlMs, now) => Effect.sync(() => {
      for (const hold of holds) {
        const budget = live(hold.budget, now)
        if (budget === undefined) continue
        const held = budget.holds.get(hold.id)
        if (held?.value === "done") continue
        // A hold that lapsed (or was lost with the store) belongs to a call still running: count it again.
        if (held === undefined) budget.reserved += hold.amount
        setHold(budget, hold.id, { value: hold.amount, expiresAt: now + ttlMs })
      }
    }),

    budgetSeed: (seed) => Effect.sync(() => {
      if (budgets.has(seed.budget)) return false
      budgets.set(seed.budget, {
        spent: seed.spent,
        reserved: 0,
        granted: seed.granted,
        grants: new Set(seed.grantIds),
        holds: new Map(),
        expireAt: seed.expireAt,
        nextLapse: Infinity
      })
      return true
    }),

    budgetGrant: (grant) => Effect.sync(() => {
      const budget = budgets.get(grant.budget)
      if (budget === undefined || budget.grants.has(grant.grantId)) return false
      budget.grants.add(grant.grantId)
      budget.granted += grant.amount
      return true
    }),

    budgetState: (name, now) => Effect.sync(() => {
      const budget = live(name, now)
      return budget === undefined ? undefined : stateOf(budget)
    })
  }
}
