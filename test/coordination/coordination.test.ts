/**
 * The store's primitives, with explicit times, against the in-process store and Redis alike:
 * both must answer the same numbers.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { Redis } from "ioredis"
import { inject } from "vitest"
import { Coordination } from "../../src/coordination/coordination.ts"
import { stores } from "./support.ts"

const MINUTE = 60_000
const rpm = (capacity: number, cost = 1) => ({ name: "rpm", capacity, periodMs: MINUTE, cost })
const tpm = (capacity: number, cost: number) => ({ name: "tpm", capacity, periodMs: MINUTE, cost })
const T0 = 1_767_225_600_000
/** Seed fields for a budget without pending charges. */
const fresh = { now: T0, counted: [], uncounted: [], final: false }

for (const store of stores()) {
  describe(`coordination (${store.name})`, () => {
    const run = <A, E>(effect: Effect.Effect<A, E, Coordination>) => effect.pipe(Effect.provide(store.fresh().layer))

    it.live("a bucket admits its capacity, then says when the next token arrives", () =>
      run(Effect.gen(function*() {
        const c = yield* Coordination
        const gate = (now: number) => c.gate({ scope: "k1", buckets: [rpm(3)], now })
        for (let i = 0; i < 3; i++) expect((yield* gate(T0)).admitted).toBe(true)
        const refused = yield* gate(T0 + 1_000)
        expect(refused.admitted).toBe(false)
        // 3 per minute refills one token per 20 s; 1 s has passed.
        expect(refused.buckets[0]).toEqual({ name: "rpm", capacity: 3, remaining: 0, resetMs: 59_000, retryAfterMs: 19_000 })
        const later = yield* gate(T0 + 20_000)
        expect(later.admitted).toBe(true)
        expect(later.buckets[0]).toMatchObject({ remaining: 0, resetMs: 60_000, retryAfterMs: 0 })
      })))

    it.live("buckets and lease are taken all or nothing", () =>
      run(Effect.gen(function*() {
        const c = yield* Coordination
        const first = yield* c.gate({ scope: "k2", buckets: [rpm(10), tpm(1_000, 900)], now: T0 })
        expect(first.buckets.map((b) => b.remaining)).toEqual([9, 100])
        const refused = yield* c.gate({ scope: "k2", buckets: [rpm(10), tpm(1_000, 500)], now: T0 })
        expect(refused.admitted).toBe(false)
        expect(refused.buckets[0].retryAfterMs).toBe(0)
        expect(refused.buckets[1].retryAfterMs).toBe(24_000)
        // The refused request took no request token.
        const small = yield* c.gate({ scope: "k2", buckets: [rpm(10), tpm(1_000, 100)], now: T0 })
        expect(small.buckets.map((b) => b.remaining)).toEqual([8, 0])
        // A cost above the capacity is clamped: it waits for a full bucket instead of never passing.
        const huge = yield* c.gate({ scope: "k3", buckets: [tpm(1_000, 5_000)], now: T0 })
        expect(huge.admitted).toBe(true)
        const next = yield* c.gate({ scope: "k3", buckets: [tpm(1_000, 5_000)], now: T0 + 30_000 })
        expect(next.buckets[0].retryAfterMs).toBe(30_000)
      })))

    it.live("leases cap concurrency, are released, and lapse when not renewed", () =>
      run(Effect.gen(function*() {
        const c = yield* Coordination
        const take = (id: string, now: number) => c.gate({ scope: "k4", buckets: [], lease: { limit: 2, id, ttlMs: 10_000 }, now })
        expect((yield* take("a", T0)).leasesInUse).toBe(1)
        expect((yield* take("b", T0)).leasesInUse).toBe(2)
        const third = yield* take("c", T0)
        expect(third).toMatchObject({ admitted: false, leaseRefused: true, leasesInUse: 2 })
        yield* c.releaseLease({ scope: "k4", id: "a" })
        expect((yield* take("c", T0 + 1)).admitted).toBe(true)
        // "b" is renewed, "c" is not: only "c" lapses.
        yield* c.renewLeases([{ scope: "k4", id: "b" }], 10_000, T0 + 8_000)
        const after = yield* take("d", T0 + 12_000)
        expect(after).toMatchObject({ admitted: true, leasesInUse: 2 })
        // Renewing a lapsed lease does not bring it back.
        yield* c.renewLeases([{ scope: "k4", id: "c" }], 10_000, T0 + 12_001)
        expect((yield* take("e", T0 + 12_002)).admitted).toBe(false)
      })))

    it.live("a budget is unseeded until seeded, then caps reservations", () =>
      run(Effect.gen(function*() {
        const c = yield* Coordination
        const reserve = (id: string, amount: number, now = T0) =>
          c.budgetReserve({ budget: "a:k5", cap: 1_000, amount, id, ttlMs: 30_000, now, expireAt: 0 })
        expect(yield* reserve("r0", 10)).toEqual({ _tag: "Unseeded" })
        expect(yield* c.budgetSeed({ budget: "a:k5", spent: 200, granted: 0, grantIds: [], expireAt: 0, ...fresh })).toBe("Seeded")
        expect(yield* c.budgetSeed({ budget: "a:k5", spent: 999, granted: 0, grantIds: [], expireAt: 0, ...fresh })).toBe("Exists")
        expect(yield* reserve("r1", 500)).toEqual({ _tag: "Reserved", state: { spent: 200, reserved: 500, granted: 0 } })
        expect((yield* reserve("r2", 301))._tag).toBe("Refused")
        expect((yield* reserve("r1", 500))._tag).toBe("Reserved") // idempotent per id
        // Settle charges the actual cost, clamped to the reservation, and only once.
        expect(yield* c.budgetSettle({ budget: "a:k5", id: "r1", chargeId: "call-r1", amount: 500, actual: 120, now: T0 })).toEqual({ state: { spent: 320, reserved: 0, granted: 0 }, charged: true, chargedMicros: 120 })
        expect(yield* c.budgetSettle({ budget: "a:k5", id: "r1", chargeId: "call-r1", amount: 500, actual: 120, now: T0 })).toEqual({ state: { spent: 320, reserved: 0, granted: 0 }, charged: false, chargedMicros: 120 })
        yield* reserve("r3", 100)
        expect(yield* c.budgetSettle({ budget: "a:k5", id: "r3", chargeId: "call-r3", amount: 100, actual: 10_000, now: T0 })).toMatchObject({ state: { spent: 420 }, charged: true, chargedMicros: 100 })
        yield* reserve("r4", 580)
        expect((yield* reserve("r5", 1))._tag).toBe("Refused") // at the cap: even the smallest call
        expect(yield* c.budgetRelease({ budget: "a:k5", id: "r4" }, T0)).toEqual({ spent: 420, reserved: 0, granted: 0 })
        expect(yield* c.budgetRelease({ budget: "a:k5", id: "r4" }, T0)).toEqual({ spent: 420, reserved: 0, granted: 0 })
      })))

    it.live("a free call's hold (0 micros) reserves, settles, releases and lapses", () =>
      run(Effect.gen(function*() {
        const c = yield* Coordination
        const B = "a:k12"
        yield* c.budgetSeed({ budget: B, spent: 10, granted: 0, grantIds: [], expireAt: 0, ...fresh })
        const reserve = (id: string) => c.budgetReserve({ budget: B, cap: 1_000, amount: 0, id, ttlMs: 10_000, now: T0, expireAt: 0 })
        expect(yield* reserve("free1")).toEqual({ _tag: "Reserved", state: { spent: 10, reserved: 0, granted: 0 } })
        yield* reserve("free2")
        yield* reserve("free3")
        // Redis once sent these decrements as "-0", which HINCRBY refuses.
        expect(yield* c.budgetSettle({ budget: B, id: "free1", chargeId: "call-free1", amount: 0, actual: 0, now: T0 })).toEqual({ state: { spent: 10, reserved: 0, granted: 0 }, charged: true, chargedMicros: 0 })
        expect(yield* c.budgetRelease({ budget: B, id: "free2" }, T0)).toEqual({ spent: 10, reserved: 0, granted: 0 })
        expect(yield* c.budgetState(B, T0 + 11_000)).toEqual({ spent: 10, reserved: 0, granted: 0 }) // free3 lapsed
      })))

    it.live("holds lapse unless renewed; a renewed lost hold counts again", () =>
      run(Effect.gen(function*() {
        const c = yield* Coordination
        yield* c.budgetSeed({ budget: "a:k6", spent: 0, granted: 0, grantIds: [], expireAt: 0, ...fresh })
        const reserve = (id: string, amount: number, now: number) =>
          c.budgetReserve({ budget: "a:k6", cap: 1_000, amount, id, ttlMs: 10_000, now, expireAt: 0 })
        yield* reserve("live", 400, T0)
        yield* reserve("dead", 400, T0)
        yield* c.budgetRenew([{ budget: "a:k6", id: "live", amount: 400 }], 10_000, T0 + 9_000)
        expect(yield* c.budgetState("a:k6", T0 + 11_000)).toEqual({ spent: 0, reserved: 400, granted: 0 })
        // The store forgot "live" (it lapsed during a stall); the running call's renewal restores it.
        expect(yield* c.budgetState("a:k6", T0 + 30_000)).toMatchObject({ reserved: 0 })
        yield* c.budgetRenew([{ budget: "a:k6", id: "live", amount: 400 }], 10_000, T0 + 30_000)
        expect(yield* c.budgetState("a:k6", T0 + 30_001)).toMatchObject({ reserved: 400 })
        // A settle of a hold that is gone still charges (the call did run).
        expect(yield* c.budgetSettle({ budget: "a:k6", id: "dead", chargeId: "call-dead", amount: 400, actual: 50, now: T0 + 30_002 })).toEqual({ state: { spent: 50, reserved: 400, granted: 0 }, charged: true, chargedMicros: 50 })
        // A renewal after the settle never resurrects it.
        yield* c.budgetRenew([{ budget: "a:k6", id: "dead", amount: 400 }], 10_000, T0 + 30_003)
        expect(yield* c.budgetState("a:k6", T0 + 30_004)).toEqual({ spent: 50, reserved: 400, granted: 0 })
      })))

    it.live("a reservation counts the room a lapsed hold gave back, and answers the state after it", () =>
      run(Effect.gen(function*() {
        const c = yield* Coordination
        yield* c.budgetSeed({ budget: "a:k6b", spent: 0, granted: 0, grantIds: [], expireAt: 0, ...fresh })
        const reserve = (id: string, amount: number, now: number) =>
          c.budgetReserve({ budget: "a:k6b", cap: 1_000, amount, id, ttlMs: 10_000, now, expireAt: 0 })
        expect(yield* reserve("old", 700, T0)).toEqual({ _tag: "Reserved", state: { spent: 0, reserved: 700, granted: 0 } })
        expect((yield* reserve("early", 600, T0 + 5_000))._tag).toBe("Refused")
        // "old" lapsed at T0 + 10 s: nothing else has swept it when this reservation arrives.
        expect(yield* reserve("late", 600, T0 + 11_000)).toEqual({ _tag: "Reserved", state: { spent: 0, reserved: 600, granted: 0 } })
      })))

    it.live("a sweep of more lapsed ids than one slice returns every active hold and forgets every settled id", () =>
      run(Effect.gen(function*() {
        const c = yield* Coordination
        const B = "a:k6c"
        yield* c.budgetSeed({ budget: B, spent: 0, granted: 0, grantIds: [], expireAt: 0, ...fresh })
        // 2,500 holds of 3 micros (Redis sweeps 1,000 ids per slice); every fifth is settled at 1
        // micro (its hold id and its charge id are then remembered as done until they lapse too).
        const ids = Array.from({ length: 2_500 }, (_, i) => `h${i}`)
        yield* Effect.forEach(ids, (id) => c.budgetReserve({ budget: B, cap: 1_000_000, amount: 3, id, ttlMs: 10_000, now: T0, expireAt: 0 }), { concurrency: 50, discard: true })
        const settled = ids.filter((_, i) => i % 5 === 0)
        yield* Effect.forEach(settled, (id) => c.budgetSettle({ budget: B, id, chargeId: `charge-${id}`, amount: 3, actual: 1, now: T0 + 1 }), { concurrency: 50, discard: true })
        expect(yield* c.budgetState(B, T0 + 2)).toEqual({ spent: 500, reserved: 6_000, granted: 0 })
        // All of it lapses (the settled ids are remembered for the store's memory, then forgotten).
        expect(yield* c.budgetState(B, T0 + 24 * 60 * MINUTE)).toEqual({ spent: 500, reserved: 0, granted: 0 })
        // A settled charge id forgotten: a new hold under an old id is a new hold.
        expect(yield* c.budgetReserve({ budget: B, cap: 1_000_000, amount: 3, id: "h0", ttlMs: 10_000, now: T0 + 24 * 60 * MINUTE, expireAt: 0 }))
          .toEqual({ _tag: "Reserved", state: { spent: 500, reserved: 3, granted: 0 } })
      })))

    it.live("credits: the cap is the granted total; each grant applies once", () =>
      run(Effect.gen(function*() {
        const c = yield* Coordination
        const reserve = (id: string, amount: number) =>
          c.budgetReserve({ budget: "c:k7", cap: null, amount, id, ttlMs: 30_000, now: T0, expireAt: 0 })
        expect(yield* c.budgetGrant({ budget: "c:k7", grantId: "g0", amount: 5 })).toBe(false) // unseeded
        yield* c.budgetSeed({ budget: "c:k7", spent: 100, granted: 300, grantIds: ["g1"], expireAt: 0, ...fresh })
        expect(yield* c.budgetGrant({ budget: "c:k7", grantId: "g1", amount: 300 })).toBe(false)
        expect((yield* reserve("r1", 201))._tag).toBe("Refused")
        expect(yield* c.budgetGrant({ budget: "c:k7", grantId: "g2", amount: 1_000 })).toBe(true)
        expect(yield* reserve("r1", 201)).toEqual({ _tag: "Reserved", state: { spent: 100, reserved: 201, granted: 1_300 } })
      })))

    it.live("200 concurrent reservations never pass the cap", () =>
      run(Effect.gen(function*() {
        const c = yield* Coordination
        yield* c.budgetSeed({ budget: "a:k8", spent: 0, granted: 0, grantIds: [], expireAt: 0, ...fresh })
        const answers = yield* Effect.forEach(Array.from({ length: 200 }, (_, i) => i), (i) =>
          c.budgetReserve({ budget: "a:k8", cap: 10_000, amount: 100 + (i % 7) * 50, id: `r${i}`, ttlMs: 30_000, now: T0, expireAt: 0 }),
        { concurrency: "unbounded" })
        const granted = answers.flatMap((a, i) => (a._tag === "Reserved" ? [100 + (i % 7) * 50] : []))
        const total = granted.reduce((sum, n) => sum + n, 0)
        expect(total).toBeLessThanOrEqual(10_000)
        expect(total).toBeGreaterThan(10_000 - 400)
        expect((yield* c.budgetState("a:k8", T0))?.reserved).toBe(total)
      })))

    it.live("a lost budget keeps what instances re-register: holds, and charges SQL may not have yet", () => {
      const { layer, wipe } = store.fresh()
      return Effect.gen(function*() {
        const c = yield* Coordination
        const B = "a:k9"
        const reserve = (id: string, amount: number, now = T0) =>
          c.budgetReserve({ budget: B, cap: 10_000, amount, id, ttlMs: 30_000, now, expireAt: 0 })
        yield* c.budgetSeed({ budget: B, spent: 1_000, granted: 0, grantIds: [], expireAt: 0, ...fresh })
        yield* reserve("r1", 2_000)
        yield* reserve("r2", 3_000)
        yield* wipe
        expect(yield* reserve("r3", 100)).toEqual({ _tag: "Unseeded" })
        // The running calls' instance re-registers their holds on the unseeded budget.
        yield* c.budgetRenew([{ budget: B, id: "r1", amount: 2_000 }, { budget: B, id: "r2", amount: 3_000 }], 30_000, T0 + 1)
        // r1 settles while unseeded: a pending charge; settling again (a retry) changes nothing.
        expect(yield* c.budgetSettle({ budget: B, id: "r1", chargeId: "call-1", amount: 2_000, actual: 1_500, now: T0 + 2 })).toEqual({ state: undefined, charged: true, chargedMicros: 1_500 })
        expect(yield* c.budgetSettle({ budget: B, id: "r1", chargeId: "call-1", amount: 2_000, actual: 1_500, now: T0 + 2 })).toEqual({ state: undefined, charged: false, chargedMicros: 1_500 })
        // Unwritten ledger rows of calls settled before the loss; call-1 is applied already.
        yield* c.budgetCharge([{ budget: B, id: "call-0", amount: 700 }, { budget: B, id: "call-1", amount: 1_500 }, { budget: B, id: "call-x", amount: 50 }], T0 + 3)
        expect([...(yield* c.budgetPendingCharges(B))].sort()).toEqual(["call-0", "call-1", "call-x"])
        expect(yield* c.budgetState(B, T0 + 3)).toBeUndefined()
        // A charge that arrived after the caller's SQL look-up makes the seed stale.
        yield* c.budgetCharge([{ budget: B, id: "call-late", amount: 10 }], T0 + 4)
        const lookedUp = { budget: B, spent: 1_700, granted: 0, grantIds: [], expireAt: 0, now: T0 + 5, counted: ["call-0"], uncounted: ["call-1", "call-x"] }
        expect(yield* c.budgetSeed({ ...lookedUp, final: false })).toBe("Stale")
        expect(yield* c.budgetState(B, T0 + 5)).toBeUndefined()
        // SQL had call-0 (in its 1,700); call-1, call-x and call-late are added; r2's hold stays.
        expect(yield* c.budgetSeed({ ...lookedUp, uncounted: ["call-1", "call-x", "call-late"], final: false })).toBe("Seeded")
        expect(yield* c.budgetState(B, T0 + 6)).toEqual({ spent: 1_700 + 1_500 + 50 + 10, reserved: 3_000, granted: 0 })
        expect(yield* c.budgetPendingCharges(B)).toEqual([])
        // After the seed: a retried settle of r1 and a late re-registration of its charge are no-ops.
        expect(yield* c.budgetSettle({ budget: B, id: "r1", chargeId: "call-1", amount: 2_000, actual: 1_500, now: T0 + 7 })).toMatchObject({ charged: false, chargedMicros: 1_500 })
        yield* c.budgetCharge([{ budget: B, id: "call-2", amount: 999 }], T0 + 7)
        // A charge re-registered while unseeded is remembered with its amount too.
        expect(yield* c.budgetSettle({ budget: B, id: "r9", chargeId: "call-x", amount: 100, actual: 90, now: T0 + 7 })).toMatchObject({ charged: false, chargedMicros: 50 })
        expect(yield* c.budgetState(B, T0 + 7)).toEqual({ spent: 3_260, reserved: 3_000, granted: 0 })
        // r2 settles normally; the cap now counts everything.
        expect(yield* c.budgetSettle({ budget: B, id: "r2", chargeId: "call-2", amount: 3_000, actual: 3_000, now: T0 + 8 })).toEqual({ state: { spent: 6_260, reserved: 0, granted: 0 }, charged: true, chargedMicros: 3_000 })
        expect((yield* reserve("r4", 3_741, T0 + 9))._tag).toBe("Refused")
        expect((yield* reserve("r4", 3_740, T0 + 9))._tag).toBe("Reserved")
      }).pipe(Effect.provide(layer))
    })

    it.live("a charge is applied once per charge id, whichever way it arrives", () =>
      run(Effect.gen(function*() {
        const c = yield* Coordination
        const B = "a:k10"
        yield* c.budgetSeed({ budget: B, spent: 0, granted: 0, grantIds: [], expireAt: 0, ...fresh })
        yield* c.budgetReserve({ budget: B, cap: 10_000, amount: 500, id: "r1", ttlMs: 30_000, now: T0, expireAt: 0 })
        // Two holds, one charge id (a call re-run under the same ledger id): charged once.
        yield* c.budgetReserve({ budget: B, cap: 10_000, amount: 500, id: "r2", ttlMs: 30_000, now: T0, expireAt: 0 })
        // The second settle says it did not charge (its usage must not reach the ledger) and what the
        // first one charged (what the key bore for the id, which a run step reports).
        expect(yield* c.budgetSettle({ budget: B, id: "r1", chargeId: "call-1", amount: 500, actual: 400, now: T0 })).toMatchObject({ charged: true, chargedMicros: 400 })
        expect(yield* c.budgetSettle({ budget: B, id: "r2", chargeId: "call-1", amount: 500, actual: 300, now: T0 })).toEqual({ state: { spent: 400, reserved: 0, granted: 0 }, charged: false, chargedMicros: 400 })
        // A released hold is final: a settle after it charges nothing.
        yield* c.budgetReserve({ budget: B, cap: 10_000, amount: 500, id: "r3", ttlMs: 30_000, now: T0, expireAt: 0 })
        yield* c.budgetRelease({ budget: B, id: "r3" }, T0)
        expect(yield* c.budgetSettle({ budget: B, id: "r3", chargeId: "call-3", amount: 500, actual: 400, now: T0 })).toEqual({ state: { spent: 400, reserved: 0, granted: 0 }, charged: false, chargedMicros: undefined })
        // A renewal never brings a finished hold back, on a lost budget either.
        yield* c.budgetRenew([{ budget: B, id: "r3", amount: 500 }], 30_000, T0 + 1)
        expect(yield* c.budgetState(B, T0 + 1)).toEqual({ spent: 400, reserved: 0, granted: 0 })
        // On a seeded budget a re-registered charge is ignored: SQL may have it already.
        yield* c.budgetCharge([{ budget: B, id: "call-9", amount: 100 }], T0 + 2)
        expect(yield* c.budgetState(B, T0 + 2)).toEqual({ spent: 400, reserved: 0, granted: 0 })
        // `final` counts a charge nobody looked up rather than miss it.
        yield* c.budgetSettle({ budget: "a:k11", id: "r1", chargeId: "call-y", amount: 100, actual: 100, now: T0 })
        expect(yield* c.budgetSeed({ budget: "a:k11", spent: 5, granted: 0, grantIds: [], expireAt: 0, now: T0, counted: [], uncounted: [], final: true })).toBe("Seeded")
        expect(yield* c.budgetState("a:k11", T0)).toEqual({ spent: 105, reserved: 0, granted: 0 })
        // A hold whose id is its charge id: the amount is remembered under the one id.
        yield* c.budgetSeed({ budget: "a:k14", spent: 0, granted: 0, grantIds: [], expireAt: 0, ...fresh })
        yield* c.budgetReserve({ budget: "a:k14", cap: 10_000, amount: 500, id: "same", ttlMs: 30_000, now: T0, expireAt: 0 })
        expect(yield* c.budgetSettle({ budget: "a:k14", id: "same", chargeId: "same", amount: 500, actual: 250, now: T0 })).toMatchObject({ charged: true, chargedMicros: 250 })
        expect(yield* c.budgetSettle({ budget: "a:k14", id: "same", chargeId: "same", amount: 500, actual: 300, now: T0 })).toEqual({ state: { spent: 250, reserved: 0, granted: 0 }, charged: false, chargedMicros: 250 })
      })))

    it.live("the epoch: none in a new or lost store; the first one created stays", () => {
      const { layer, wipe } = store.fresh()
      return Effect.gen(function*() {
        const c = yield* Coordination
        expect(yield* c.epochRead()).toBeUndefined()
        expect(yield* c.epochInit({ id: "e1", fenceUntil: 0 })).toEqual({ id: "e1", fenceUntil: 0 })
        expect(yield* c.epochInit({ id: "e2", fenceUntil: T0 })).toEqual({ id: "e1", fenceUntil: 0 })
        expect(yield* c.epochRead()).toEqual({ id: "e1", fenceUntil: 0 })
        yield* wipe
        expect(yield* c.epochRead()).toBeUndefined()
        expect(yield* c.epochInit({ id: "e3", fenceUntil: T0 + 5_000 })).toEqual({ id: "e3", fenceUntil: T0 + 5_000 })
      }).pipe(Effect.provide(layer))
    })
  })
}

/**
 * Redis only: a seeded budget's keys expire together (B's expiry, from its seed). The settle
 * script re-applies it only where a hold key may be new (a settle of a hold that was lost), so this
 * reads every key's expiry after each kind of write. (The reserve script applies it every time:
 * doing so only where its hold keys were new, one EXISTS instead of three PEXPIREATs, read no
 * change in Redis's time per request, 2026-12-01.)
 */
const redisStore = stores().find((store) => store.name === "redis")
describe.runIf(redisStore !== undefined)("a seeded budget's keys expire together (redis)", () => {
  it.live("after a reserve, a settle, a settle of a lost hold, and a reserve into emptied hold keys (each makes them again)", () => {
    const { layer, prefix } = redisStore!.fresh()
    const { redisUrl } = inject("services")
    return Effect.gen(function*() {
      const c = yield* Coordination
      const now = Date.now()
      const expireAt = now + 3_600_000
      const expiries = (budget: string) =>
        Effect.promise(async () => {
          const redis = new Redis(redisUrl!)
          try {
            return await Promise.all(["b", "bh", "be"].map((part) => redis.call("PEXPIRETIME", `${prefix}${part}:{${budget}}`) as Promise<number>))
          } finally {
            redis.disconnect()
          }
        })
      for (const budget of ["a:x1", "a:x2"]) yield* c.budgetSeed({ budget, spent: 0, granted: 0, grantIds: [], expireAt, now, counted: [], uncounted: [], final: false })
      yield* c.budgetReserve({ budget: "a:x1", cap: 10_000, amount: 500, id: "h1", ttlMs: 30_000, now, expireAt })
      expect(yield* expiries("a:x1")).toEqual([expireAt, expireAt, expireAt])
      yield* c.budgetSettle({ budget: "a:x1", id: "h1", chargeId: "call-h1", amount: 500, actual: 100, now: now + 1 })
      expect(yield* expiries("a:x1")).toEqual([expireAt, expireAt, expireAt])
      // A hold that lapsed and was swept: its budget's hold keys are gone (empty), and the settle
      // (the call did run) writes them again.
      yield* c.budgetReserve({ budget: "a:x2", cap: 10_000, amount: 500, id: "h2", ttlMs: 10, now, expireAt })
      expect(yield* c.budgetState("a:x2", now + 1_000)).toEqual({ spent: 0, reserved: 0, granted: 0 })
      expect((yield* expiries("a:x2")).slice(1)).toEqual([-2, -2])
      expect(yield* c.budgetSettle({ budget: "a:x2", id: "h2", chargeId: "call-h2", amount: 500, actual: 100, now: now + 1_001 })).toMatchObject({ charged: true })
      const [b, h, e] = yield* expiries("a:x2")
      expect(b).toBe(expireAt)
      // (Copied from B's remaining time to live, in whole milliseconds.)
      for (const at of [h, e]) expect(Math.abs(at! - expireAt)).toBeLessThan(50)
      // A reservation into hold keys a sweep emptied (and Redis deleted) makes them again, with the expiry.
      yield* c.budgetSeed({ budget: "a:x3", spent: 0, granted: 0, grantIds: [], expireAt, now, counted: [], uncounted: [], final: false })
      yield* c.budgetReserve({ budget: "a:x3", cap: 10_000, amount: 500, id: "h3", ttlMs: 10, now, expireAt })
      expect(yield* c.budgetState("a:x3", now + 1_000)).toEqual({ spent: 0, reserved: 0, granted: 0 })
      expect((yield* expiries("a:x3")).slice(1)).toEqual([-2, -2])
      yield* c.budgetReserve({ budget: "a:x3", cap: 10_000, amount: 500, id: "h4", ttlMs: 30_000, now: now + 1_001, expireAt })
      expect(yield* expiries("a:x3")).toEqual([expireAt, expireAt, expireAt])
    }).pipe(Effect.provide(layer))
  })
})
