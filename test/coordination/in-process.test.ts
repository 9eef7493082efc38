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
