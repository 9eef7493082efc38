/**
 * What only the in-process store has to get right on its own: it remembers finished ids in
 * generations (coordination/in-process.ts), so a long run — far more ids than one generation —
 * must still answer retries from every generation and forget each id exactly when its memory ends.
 */
import { describe, expect, it } from "vitest"
import { Effect } from "effect"
import { makeInProcess } from "../../src/coordination/in-process.ts"
import { SETTLED_MEMORY_MS } from "../../src/coordination/types.ts"

const T0 = 1_767_225_600_000
const BUDGET = "allowance:k1:2026-01"

describe("in-process store: finished ids over a long run", () => {
  it("40,000 settles over 13 minutes: retries are no-ops while remembered; forgotten ones charge again", () => {
    const store = makeInProcess()
    const local = store.local
    if (local === undefined) throw new Error("the in-process store answers synchronously")
    Effect.runSync(store.budgetSeed({ budget: BUDGET, spent: 0, granted: 0, grantIds: [], expireAt: 0, now: T0, counted: [], uncounted: [], final: false }))
    const STEP_MS = 20
    const N = 40_000
    const at = (i: number) => T0 + i * STEP_MS
    const settle = (i: number, now: number) =>
      local.budgetSettle({ budget: BUDGET, id: `res_${i}`, chargeId: `req_${i}`, amount: 1, actual: 1, now })
    for (let i = 0; i < N; i++) {
      const reserved = local.budgetReserve({ budget: BUDGET, cap: 1_000_000_000, amount: 1, id: `res_${i}`, ttlMs: 60_000, now: at(i), expireAt: 0 })
      expect(reserved._tag).toBe("Reserved")
      settle(i, at(i))
    }
    const end = at(N - 1)
    expect(local.budgetSettle({ budget: BUDGET, id: "res_none", chargeId: "req_none", amount: 0, actual: 0, now: end })).toEqual({ state: { spent: N, reserved: 0, granted: 0 }, charged: true, chargedMicros: 0 })
    // Settled within the memory: the newest, one in a middle generation, the oldest still remembered.
    const oldestRemembered = Math.ceil((end - T0 - SETTLED_MEMORY_MS + 1) / STEP_MS)
    for (const i of [N - 1, 25_000, oldestRemembered]) expect(settle(i, end)).toEqual({ state: { spent: N, reserved: 0, granted: 0 }, charged: false, chargedMicros: 1 })
    // A reserve under a remembered id is answered as already held, without counting it again.
    expect(local.budgetReserve({ budget: BUDGET, cap: 1_000_000_000, amount: 5, id: "res_30000", ttlMs: 60_000, now: end, expireAt: 0 }))
      .toEqual({ _tag: "Reserved", state: { spent: N, reserved: 0, granted: 0 } })
    // Settled exactly SETTLED_MEMORY_MS ago or earlier: forgotten, so a late retry charges again.
    expect(settle(oldestRemembered - 1, end)).toEqual({ state: { spent: N + 1, reserved: 0, granted: 0 }, charged: true, chargedMicros: 1 })
    expect(settle(0, end).state?.spent).toBe(N + 2)
  })
})

describe("in-process store: the rate windows of keys that went quiet", () => {
  it("drops a key's scope once its windows drained and it holds no lease; every answer stays what it was", () => {
    const store = makeInProcess()
    const local = store.local!
    const rpm = (scope: string, now: number, lease?: { id: string }) =>
      local.gate({
        scope,
        now,
        buckets: [{ name: "rpm", capacity: 10, periodMs: 60_000, cost: 1 }],
        ...(lease === undefined ? {} : { lease: { id: lease.id, limit: 1, ttlMs: 600_000 } })
      })
    // 500 keys make a request each (drained 6 s later); one holds a concurrency lease for 10 minutes.
    for (let i = 0; i < 500; i++) rpm(`key_${i}`, T0)
    expect(rpm("holder", T0, { id: "lease-1" }).admitted).toBe(true)
    expect(store.scopeCount()).toBe(501)
    // "busy" uses 5 of its 10 a minute (drained 30 s later); then gates of another key drop the rest.
    for (let i = 0; i < 5; i++) rpm("busy", T0 + 58_000)
    for (let i = 0; i < 400; i++) rpm("other", T0 + 61_000)
    expect(store.scopeCount()).toBe(3) // other, busy, holder
    // What was dropped answers as it would have: a drained window is an empty one.
    expect(rpm("key_7", T0 + 61_000).buckets[0]).toMatchObject({ remaining: 9 })
    // The lease holder was kept: its lease still refuses a second one.
    expect(rpm("holder", T0 + 61_000, { id: "lease-2" })).toMatchObject({ admitted: false, leaseRefused: true })
    expect(rpm("busy", T0 + 61_000).buckets[0]!.remaining).toBeLessThan(9)
  })
})
