/**
 * The hard allowance through the real services (Allowance, UsageLedger on embedded PGlite, the
 * coordination store in process and on Redis), with TestClock for months.
 */
import { describe, expect, layer } from "@effect/vitest"
import { Context, Effect, Fiber, Layer } from "effect"
import { TestClock } from "effect/testing"
import { inject } from "vitest"
import type { Plan } from "../../src/config/schema.ts"
import { Coordination } from "../../src/coordination/coordination.ts"
import { makeInProcess } from "../../src/coordination/in-process.ts"
import { newId } from "../../src/util/ids.ts"
import { Allowance } from "../../src/metering/allowance.ts"
import { UsageLedger } from "../../src/metering/usage-ledger.ts"
import { makeUsage } from "../../src/model/usage.ts"
import { dropPrefix, uniquePrefix } from "../coordination/support.ts"
import { embeddedDatabasePerFile, storeKinds, untilSuccess } from "./support.ts"

const plan = (allowanceUsd: number, prepaid = false): Plan => ({ allowanceUsd, rpm: 1_000, tpm: 1_000_000, concurrency: 100, prepaid })
const MAY_15_2030 = Date.UTC(2030, 4, 15, 12)
const usage = makeUsage({ inputTokens: 10, outputTokens: 10 })

/** Every block's database (one per file: see `embeddedDatabasePerFile`). */
const database = embeddedDatabasePerFile()

for (const store of storeKinds()) {
  describe(`allowance (${store.name})`, () => {
    // The ledger never flushes on its own here: tests flush when they mean to.
    const services = () => Allowance.layer.pipe(
      Layer.provideMerge(UsageLedger.layerWith({ flushIntervalMs: 3_600_000 })),
      Layer.provideMerge(store.layer())
    )

    // The database is built on the live clock (its connection timers); each test has its own TestClock.
    /**
     * Runs `body` with the services, on a TestClock set to `start` before they are built: moving
     * the clock later replays every tick of their background loops, which from 1970 takes forever.
     */
    const at = <A, E, R>(start: number, body: Effect.Effect<A, E, R>) =>
      Effect.andThen(TestClock.setTime(start), body).pipe(Effect.provide(TestClock.layer()))

    layer(database.layer(), { timeout: "60 seconds", excludeTestServices: true })((it) => {
      it.effect("200 concurrent reservations never pass the allowance, nor do settles racing new ones", () =>
        at(MAY_15_2030, Effect.gen(function*() {
          const allowance = yield* Allowance
          const keyId = newId("key")
          const cap = plan(0.01) // 10,000 µ$
          const amountOf = (i: number) => 100 + (i % 9) * 50
          const first = yield* Effect.forEach(Array.from({ length: 200 }, (_, i) => i), (i) =>
            Effect.result(allowance.reserve({ keyId, plan: cap, maxCostMicros: amountOf(i) })), { concurrency: "unbounded" })
          const held = first.flatMap((r) => (r._tag === "Success" ? [r.success] : []))
          const heldTotal = held.reduce((sum, r) => sum + r.amountMicros, 0)
          expect(heldTotal).toBeLessThanOrEqual(10_000)
          expect(heldTotal).toBeGreaterThan(10_000 - 100)
          for (const r of first) if (r._tag === "Failure") expect(r.failure).toMatchObject({ _tag: "LimitExceeded", kind: "allowance_exhausted" })
          // Settle every hold at half its price while 200 more reservations race for the freed room.
          const second = yield* Effect.forEach([
            ...held.map((r) => Effect.as(allowance.settle(r, Math.floor(r.amountMicros / 2)), undefined)),
            ...Array.from({ length: 200 }, (_, i) => Effect.result(allowance.reserve({ keyId, plan: cap, maxCostMicros: amountOf(i) })))
          ], (e) => e, { concurrency: "unbounded" })
          const spent = held.reduce((sum, r) => sum + Math.floor(r.amountMicros / 2), 0)
          const reservedAgain = second.reduce((sum, r) => (r?._tag === "Success" ? sum + r.success.amountMicros : sum), 0)
          expect(spent + reservedAgain).toBeLessThanOrEqual(10_000)
          expect(yield* allowance.remaining(keyId, cap)).toBe(10_000 - spent - reservedAgain)
        }).pipe(Effect.provide(services()))), 60_000)

      it.effect("settle charges the actual cost (clamped to the reservation); release returns it", () =>
        at(MAY_15_2030, Effect.gen(function*() {
          const allowance = yield* Allowance
          const keyId = newId("key")
          const dollar = plan(1)
          const r1 = yield* allowance.reserve({ keyId, plan: dollar, maxCostMicros: 300_000 })
          expect(r1.remainingMicros).toBe(700_000)
          expect(yield* allowance.settle(r1, 100_000)).toEqual({ remaining: 900_000, charged: true, chargedMicros: 100_000 })
          // A repeated settle charges nothing, and answers what the first one charged.
          expect(yield* allowance.settle(r1, 60_000)).toEqual({ remaining: 900_000, charged: false, chargedMicros: 100_000 })
          const r2 = yield* allowance.reserve({ keyId, plan: dollar, maxCostMicros: 500_000 })
          expect(yield* allowance.remaining(keyId, dollar)).toBe(400_000)
          expect(yield* allowance.release(r2)).toBe(900_000)
          const r3 = yield* allowance.reserve({ keyId, plan: dollar, maxCostMicros: 50_000 })
          expect(yield* allowance.settle(r3, 80_000)).toEqual({ remaining: 850_000, charged: true, chargedMicros: 50_000 }) // never more than reserved
        }).pipe(Effect.provide(services()))))

      it.effect("exhaustion lasts until the first instant of next month (UTC), then lifts", () =>
        at(Date.UTC(2030, 0, 31, 23, 59, 0), Effect.gen(function*() {
          const allowance = yield* Allowance
          const keyId = newId("key")
          const tiny = plan(0.001)
          yield* allowance.settle(yield* allowance.reserve({ keyId, plan: tiny, maxCostMicros: 1_000 }), 1_000)
          const refused = yield* Effect.flip(allowance.reserve({ keyId, plan: tiny, maxCostMicros: 1 }))
          expect(refused).toMatchObject({ _tag: "LimitExceeded", kind: "allowance_exhausted", retryAfterSeconds: 60 })
          yield* TestClock.adjust(59_500)
          expect(yield* Effect.flip(allowance.reserve({ keyId, plan: tiny, maxCostMicros: 1 }))).toMatchObject({ retryAfterSeconds: 1 })
          yield* TestClock.adjust(500) // 2030-02-01T00:00:00Z
          const february = yield* allowance.reserve({ keyId, plan: tiny, maxCostMicros: 1_000 })
          expect(february.remainingMicros).toBe(0)
        }).pipe(Effect.provide(services()))))

      it.effect("a 28-day February resets on March 1st", () =>
        at(Date.UTC(2030, 1, 28, 0, 0, 0), Effect.gen(function*() {
          const allowance = yield* Allowance
          const keyId = newId("key")
          const failure = yield* Effect.flip(allowance.reserve({ keyId, plan: plan(0), maxCostMicros: 1 }))
          expect(failure.retryAfterSeconds).toBe(86_400)
        }).pipe(Effect.provide(services()))))

      it.effect("a plan upgrade lifts exhaustion at once", () =>
        at(MAY_15_2030, Effect.gen(function*() {
          const allowance = yield* Allowance
          const keyId = newId("key")
          yield* allowance.settle(yield* allowance.reserve({ keyId, plan: plan(0.5), maxCostMicros: 500_000 }), 500_000)
          expect(yield* Effect.flip(allowance.reserve({ keyId, plan: plan(0.5), maxCostMicros: 10 }))).toMatchObject({ kind: "allowance_exhausted" })
          const upgraded = yield* allowance.reserve({ keyId, plan: plan(5), maxCostMicros: 10 })
          expect(upgraded.remainingMicros).toBe(5_000_000 - 500_000 - 10)
        }).pipe(Effect.provide(services()))))

      it.effect("prepaid: credits_exhausted without retry-after until a top-up", () =>
        at(MAY_15_2030, Effect.gen(function*() {
          const allowance = yield* Allowance
          const keyId = newId("key")
          const prepaid = plan(0, true)
          const empty = yield* Effect.flip(allowance.reserve({ keyId, plan: prepaid, maxCostMicros: 10 }))
          expect(empty).toMatchObject({ _tag: "LimitExceeded", kind: "credits_exhausted" })
          expect(empty.retryAfterSeconds).toBeUndefined()
          expect((yield* allowance.addCredits(keyId, 0.5)).balanceMicros).toBe(500_000)
          const r = yield* allowance.reserve({ keyId, plan: prepaid, maxCostMicros: 400_000 })
          expect(yield* Effect.flip(allowance.reserve({ keyId, plan: prepaid, maxCostMicros: 200_000 }))).toMatchObject({ kind: "credits_exhausted" })
          expect((yield* allowance.settle(r, 100_000)).remaining).toBe(400_000)
          expect((yield* allowance.addCredits(keyId, 1)).balanceMicros).toBe(1_400_000)
          expect((yield* Effect.flip(allowance.addCredits(keyId, -1)))._tag).toBe("InvalidRequest")
        }).pipe(Effect.provide(services()))))

      it.effect("an empty store is rebuilt from the SQL ledger and the credit grants", () =>
        Effect.gen(function*() {
          yield* TestClock.setTime(MAY_15_2030)
          const keyId = newId("key")
          const entry = (costMicros: number, at: number, funding: "allowance" | "credits") =>
            ({ keyId, model: "svc-pico-1", requestId: newId("call"), usage, costMicros, at: new Date(at), funding })
          // Written by an earlier life of the gateway: two this month, one last month, one on credits.
          yield* Effect.gen(function*() {
            const ledger = yield* UsageLedger
            yield* ledger.record(entry(200_000, MAY_15_2030 - 1_000, "allowance"))
            yield* ledger.record(entry(50_000, Date.UTC(2030, 4, 1), "allowance"))
            yield* ledger.record(entry(700_000, Date.UTC(2030, 3, 30, 23, 59), "allowance"))
            yield* ledger.record(entry(30_000, MAY_15_2030 - 1_000, "credits"))
            yield* (yield* Allowance).addCredits(keyId, 0.1)
          }).pipe(Effect.provide(services()))
          // A new life on an empty store: spend comes back from SQL.
          yield* Effect.gen(function*() {
            const allowance = yield* Allowance
            expect(yield* allowance.remaining(keyId, plan(1))).toBe(750_000)
            expect(yield* allowance.remaining(keyId, plan(0, true))).toBe(70_000)
            const r = yield* allowance.reserve({ keyId, plan: plan(1), maxCostMicros: 750_000 })
            expect(r.remainingMicros).toBe(0)
          }).pipe(Effect.provide(services()))
        }).pipe(Effect.provide(TestClock.layer())))
    })
  })
}

const { redisUrl } = inject("services")
describe.skipIf(redisUrl === null)("allowance across instances (redis)", () => {
  layer(database.layer(), { timeout: "60 seconds", excludeTestServices: true })((it) => {
    it.effect("a dead instance's reservations lapse; a live one's are renewed", () => {
      const prefix = uniquePrefix()
      // A ttl twenty renewals long: only a stall of the test process of nearly 2 s could let a live
      // instance's hold lapse (a loaded CI machine stalls for hundreds of milliseconds at times).
      const instance = () => Allowance.layerWith({ holdTtlMs: 2_000, renewEveryMs: 100 }).pipe(
        Layer.provideMerge(UsageLedger.layerWith({ flushIntervalMs: 3_600_000 })),
        Layer.provideMerge(Coordination.layerRedis(redisUrl!, { prefix }))
      )
      const keyId = newId("key")
      const tryReserve = Effect.gen(function*() {
        return yield* Effect.result((yield* Allowance).reserve({ keyId, plan: plan(0.001), maxCostMicros: 1_000 }))
      })
      return Effect.gen(function*() {
        yield* Effect.gen(function*() {
          expect((yield* tryReserve)._tag).toBe("Success")
          // Instance A is alive and renewing: B stays refused well past the hold's ttl.
          yield* Effect.sleep(2_500)
          expect((yield* tryReserve.pipe(Effect.provide(instance())))._tag).toBe("Failure")
        }).pipe(Effect.provide(instance())) // A closes here without settling: it "dies"
        // A's hold lapses by its ttl (2 s after its last renewal): a new instance gets in then.
        expect((yield* untilSuccess(tryReserve.pipe(Effect.provide(instance()))))._tag).toBe("Success")
      }).pipe(Effect.ensuring(dropPrefix(redisUrl!, prefix)))
    }, 30_000)
  })
})

/**
 * Two instances on one store that loses everything (FLUSHALL, a restart without persistence): the
 * rebuilt budget must still count what only the instances remembered — a hold in flight, a settle
 * whose ledger row was not written yet, a settle landing while the budget is unseeded — each once.
 */
const lossyStores = (): ReadonlyArray<{ name: string; make: () => { layer: () => Layer.Layer<Coordination>; wipe: Effect.Effect<void>; drop: Effect.Effect<void> } }> => {
  const inProcess = {
    name: "in-process",
    make: () => {
      const shared = makeInProcess()
      return { layer: () => Layer.succeed(Coordination, shared), wipe: Effect.sync(() => shared.wipe()), drop: Effect.void }
    }
  }
  if (redisUrl === null) return [inProcess]
  return [inProcess, {
    name: "redis",
    make: () => {
      const prefix = uniquePrefix()
      return { layer: () => Coordination.layerRedis(redisUrl, { prefix }), wipe: dropPrefix(redisUrl, prefix), drop: dropPrefix(redisUrl, prefix) }
    }
  }]
}

for (const lossy of lossyStores()) {
  describe(`allowance after the store loses its state (${lossy.name})`, () => {
    layer(database.layer(), { timeout: "60 seconds", excludeTestServices: true })((it) => {
      it.effect("holds in flight, unwritten and late charges all count after the rebuild; a new budget does not wait", () => {
        const store = lossy.make()
        const FENCE = 1_500
        const instance = () => Allowance.layerWith({ holdTtlMs: 30_000, renewEveryMs: 10_000, epochCheckEveryMs: 100, recoveryFenceMs: FENCE }).pipe(
          Layer.provideMerge(UsageLedger.layerWith({ flushIntervalMs: 3_600_000 })),
          Layer.provideMerge(store.layer())
        )
        const dollar = plan(1)
        const entry = (keyId: string, requestId: string, costMicros: number, at: number) =>
          ({ keyId, model: "svc-pico-1", requestId, usage, costMicros, at: new Date(at), funding: "allowance" as const })
        const timed = <A, E>(effect: Effect.Effect<A, E>) =>
          Effect.gen(function*() {
            const start = Date.now()
            const result = yield* effect
            return { result, ms: Date.now() - start, end: Date.now() }
          })
        return Effect.gen(function*() {
          const a = yield* Layer.build(instance())
          const b = yield* Layer.build(instance())
          const [allowanceA, ledgerA] = [Context.get(a, Allowance), Context.get(a, UsageLedger)]
          const allowanceB = Context.get(b, Allowance)
          const c = yield* Layer.build(instance())
          const [allowanceC, ledgerC] = [Context.get(c, Allowance), Context.get(c, UsageLedger)]
          const keyId = newId("key")
          // A key's first call is not held back: its budget is new, not lost.
          const first = yield* timed(allowanceB.reserve({ keyId, plan: dollar, maxCostMicros: 100_000, requestId: "call-3" }))
          expect(first.ms).toBeLessThan(FENCE / 2)
          const inFlight = yield* allowanceA.reserve({ keyId, plan: dollar, maxCostMicros: 300_000, requestId: "call-1" })
          const settled = yield* allowanceA.reserve({ keyId, plan: dollar, maxCostMicros: 200_000, requestId: "call-2" })
          yield* allowanceA.settle(settled, 150_000)
          yield* ledgerA.record(entry(keyId, "call-2", 150_000, settled.at)) // buffered, not in SQL
          // C's call settled before the loss; its row stays in C's buffer throughout.
          const written = yield* allowanceC.reserve({ keyId, plan: dollar, maxCostMicros: 50_000, requestId: "call-5" })
          yield* allowanceC.settle(written, 50_000)
          yield* ledgerC.record(entry(keyId, "call-5", 50_000, written.at))
          expect(yield* allowanceB.remaining(keyId, dollar)).toBe(1_000_000 - 100_000 - 300_000 - 150_000 - 50_000)

          yield* store.wipe
          const wipedAt = Date.now()
          const next = yield* Effect.forkChild(timed(allowanceB.reserve({ keyId, plan: dollar, maxCostMicros: 100_000, requestId: "call-4" })))
          yield* Effect.sleep(FENCE / 3)
          // During the fence: A writes call-2's row (now in SQL and pending: counted once), and the
          // call in flight settles on the unseeded budget (a pending charge, not in SQL).
          yield* ledgerA.flush()
          yield* allowanceA.settle(inFlight, 250_000)
          yield* ledgerA.record(entry(keyId, "call-1", 250_000, inFlight.at))
          const after = yield* Fiber.join(next)
          // Measured from the wipe, not from when the fiber first ran: a stall of the test process
          // (a loaded CI machine) can only make the answer later.
          expect(after.end - wipedAt).toBeGreaterThanOrEqual(FENCE / 2)
          expect(after.result.remainingMicros).toBe(1_000_000 - 150_000 - 250_000 - 50_000 - 100_000 - 100_000)
          expect(yield* allowanceA.remaining(keyId, dollar)).toBe(350_000)
          // The epoch is whole again: another key's first call does not wait.
          const other = yield* timed(allowanceA.reserve({ keyId: newId("key"), plan: dollar, maxCostMicros: 1 }))
          expect(other.ms).toBeLessThan(FENCE / 2)
        }).pipe(Effect.scoped, Effect.ensuring(store.drop))
      }, 30_000)

      it.effect("settles that find their budget lost check the epoch at once, not at the next tick", () => {
        // The epoch's tick is an hour away: only the settles' notice can make the instance look soon.
        const store = lossy.make()
        const instance = Allowance.layerWith({ holdTtlMs: 30_000, renewEveryMs: 10_000, epochCheckEveryMs: 3_600_000, recoveryFenceMs: 1_000 }).pipe(
          Layer.provideMerge(UsageLedger.layerWith({ flushIntervalMs: 3_600_000 })),
          Layer.provideMerge(store.layer())
        )
        return Effect.gen(function*() {
          const built = yield* Layer.build(instance)
          const [allowance, coordination] = [Context.get(built, Allowance), Context.get(built, Coordination)]
          const keyId = newId("key")
          const held = yield* Effect.forEach(Array.from({ length: 20 }, (_, i) => i), (i) =>
            allowance.reserve({ keyId, plan: plan(1), maxCostMicros: 1_000, requestId: `call-${i}` }))
          yield* store.wipe
          expect(yield* coordination.epochRead()).toBeUndefined()
          // Twenty settles on the lost budget, all at once: one check after another serves them.
          yield* Effect.forEach(held, (reservation) => allowance.settle(reservation, 500), { concurrency: "unbounded", discard: true })
          // Within 5 s: the holds' renewal, every 10 s, would find the loss too.
          let epoch = yield* coordination.epochRead()
          for (const deadline = Date.now() + 5_000; epoch === undefined && Date.now() < deadline;) {
            yield* Effect.sleep(50)
            epoch = yield* coordination.epochRead()
          }
          // A new epoch, fenced: the instance took the wipe for a loss.
          expect(epoch?.fenceUntil).toBeGreaterThan(0)
        }).pipe(Effect.scoped, Effect.ensuring(store.drop))
      }, 30_000)

      it.effect("reserves that find their budgets lost share the epoch checks, not one store read each", () => {
        // Fifty keys' first calls after the loss: each waits out the fence and rebuilds its own
        // budget, but the epoch is read by checks the waiting callers share (one queued check each
        // before: fifty reads, one after another, before the first could even wait).
        const store = lossy.make()
        const reads = { count: 0 }
        const countingReads = Layer.effect(Coordination, Effect.map(Effect.service(Coordination), (real) =>
          Coordination.of({
            ...real,
            epochRead: () => Effect.suspend(() => {
              reads.count++
              return real.epochRead()
            })
          }))).pipe(Layer.provide(store.layer()))
        const instance = Allowance.layerWith({ holdTtlMs: 30_000, renewEveryMs: 10_000, epochCheckEveryMs: 3_600_000, recoveryFenceMs: 500 }).pipe(
          Layer.provideMerge(UsageLedger.layerWith({ flushIntervalMs: 3_600_000 })),
          Layer.provideMerge(countingReads)
        )
        return Effect.gen(function*() {
          const allowance = Context.get(yield* Layer.build(instance), Allowance)
          const keys = Array.from({ length: 50 }, () => newId("key"))
          yield* Effect.forEach(keys, (keyId) => allowance.reserve({ keyId, plan: plan(1), maxCostMicros: 1_000 }), { discard: true })
          yield* store.wipe
          reads.count = 0
          const answers = yield* Effect.forEach(keys, (keyId) => allowance.reserve({ keyId, plan: plan(1), maxCostMicros: 1_000 }), { concurrency: "unbounded" })
          // Rebuilt (nothing was charged yet), the first holds registered again: two holds each.
          expect(answers.map((a) => a.remainingMicros)).toEqual(keys.map(() => 1_000_000 - 2_000))
          expect(reads.count).toBeGreaterThan(0)
          expect(reads.count).toBeLessThanOrEqual(4)
        }).pipe(Effect.scoped, Effect.ensuring(store.drop))
      }, 30_000)

      it.effect("an instance that has done nothing since it started still takes a wiped store for a lost one", () => {
        // It learns the store's epoch while it is built, not when its background loop first runs:
        // one whose first look came after the wipe saw no epoch and no history, and let the rebuild
        // go ahead without waiting for the other instances' charges.
        const store = lossy.make()
        const FENCE = 1_000
        const instance = () => Allowance.layerWith({ holdTtlMs: 30_000, renewEveryMs: 10_000, epochCheckEveryMs: 100, recoveryFenceMs: FENCE }).pipe(
          Layer.provideMerge(UsageLedger.layerWith({ flushIntervalMs: 3_600_000 })),
          Layer.provideMerge(store.layer())
        )
        return Effect.gen(function*() {
          const allowance = Context.get(yield* Layer.build(instance()), Allowance)
          yield* store.wipe
          const wipedAt = Date.now()
          yield* allowance.reserve({ keyId: newId("key"), plan: plan(1), maxCostMicros: 1_000 })
          expect(Date.now() - wipedAt).toBeGreaterThanOrEqual(FENCE / 2)
        }).pipe(Effect.scoped, Effect.ensuring(store.drop))
      }, 30_000)
    })
  })
}
