/**
 * The counters exist twice: as plain maps (coordination/in-process.ts) and as Lua on Redis
 * (coordination/lua.ts), the first written to mirror the second. Generated sequences of every
 * store operation — rate buckets, leases, reservations, settles, renewals, pending charges, seeds,
 * grants, the epoch, and a wipe of the whole store — run against both in lockstep, and every answer
 * must be the same: drift between the two definitions fails here, with the shortest sequence that
 * shows it (fast-check shrinks).
 *
 * Times are explicit and move forward by generated steps. A sequence spans at most a few minutes
 * of store time, under the 10 minutes the stores remember finished ids, so Redis's own key expiry
 * (real time) never decides an answer the in-process store computes from the given times.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import fc from "fast-check"
import { inject } from "vitest"
import type { CoordinationShape } from "../../src/coordination/coordination.ts"
import { makeInProcess } from "../../src/coordination/in-process.ts"
import { makeRedis } from "../../src/coordination/redis.ts"
import { RedisClient } from "../../src/coordination/redis-client.ts"
import { uniquePrefix } from "./support.ts"

const { redisUrl } = inject("services")

const SCOPES = ["s1", "s2"]
const BUDGETS = ["a:b1", "c:b2"] // an allowance (explicit cap) and a credit pool (cap = granted)
/**
 * A hold id stands for one call's reservation, so it always comes with the same amount (a free
 * call's hold is 0); a renewal or settle carries the amount the call reserved.
 */
const HOLD_AMOUNTS: Record<string, number> = { h1: 0, h2: 120, h3: 450, h4: 600 }
const HOLDS = Object.keys(HOLD_AMOUNTS)
const CHARGES = ["c1", "c2", "c3", "h1"] // a charge id may also be a hold id
const TTL_MS = 10_000

const scope = fc.constantFrom(...SCOPES)
const budget = fc.constantFrom(...BUDGETS)
const hold = fc.constantFrom(...HOLDS)
const chargeId = fc.constantFrom(...CHARGES)
const micros = fc.integer({ min: 0, max: 600 })
const capOf = (name: string) => (name.startsWith("c:") ? null : 1_000)

/**
 * One capacity per bucket. A bucket's key lives until what it holds has drained at the capacity it
 * was written with; a later, lower capacity drains it more slowly, so the key can lapse first. On
 * one clock both stores then forget the remainder alike, but here the in-process store's clock is
 * the generated one and Redis's expiry real time: a lowered rpm limit (3, then 2 after 22 s) made
 * them differ in a clean-clone CI run.
 */
const bucket = fc.oneof(
  fc.record({ name: fc.constant("rpm"), capacity: fc.constant(3), periodMs: fc.constant(60_000), cost: fc.constant(1) }),
  fc.record({ name: fc.constant("tpm"), capacity: fc.constant(100), periodMs: fc.constant(60_000), cost: fc.integer({ min: 0, max: 150 }) })
)

const op = fc.oneof(
  fc.record({
    type: fc.constant("gate" as const),
    scope,
    buckets: fc.uniqueArray(bucket, { maxLength: 2, selector: (b) => b.name }),
    lease: fc.option(fc.record({ limit: fc.constantFrom(1, 2), id: fc.constantFrom("l1", "l2", "l3"), ttlMs: fc.constant(TTL_MS) }), { nil: undefined })
  }),
  fc.record({ type: fc.constant("releaseLease" as const), scope, id: fc.constantFrom("l1", "l2", "l3") }),
  fc.record({ type: fc.constant("renewLeases" as const), leases: fc.array(fc.record({ scope, id: fc.constantFrom("l1", "l2", "l3") }), { maxLength: 2 }) }),
  fc.record({ type: fc.constant("reserve" as const), budget, id: hold }),
  fc.record({ type: fc.constant("settle" as const), budget, id: hold, chargeId, actual: micros }),
  fc.record({ type: fc.constant("release" as const), budget, id: hold }),
  fc.record({ type: fc.constant("renew" as const), holds: fc.array(fc.record({ budget, id: hold }), { maxLength: 2 }) }),
  fc.record({ type: fc.constant("charge" as const), charges: fc.array(fc.record({ budget, id: chargeId, amount: micros }), { maxLength: 2 }) }),
  fc.record({ type: fc.constant("pending" as const), budget }),
  fc.record({
    type: fc.constant("seed" as const),
    budget,
    spent: fc.integer({ min: 0, max: 900 }),
    granted: fc.integer({ min: 0, max: 1_500 }),
    grantIds: fc.subarray(["g1", "g2"]),
    counted: fc.subarray(CHARGES),
    uncounted: fc.subarray(CHARGES),
    final: fc.boolean()
  }),
  fc.record({ type: fc.constant("grant" as const), budget, grantId: fc.constantFrom("g1", "g2", "g3"), amount: fc.integer({ min: 1, max: 800 }) }),
  fc.record({ type: fc.constant("state" as const), budget }),
  fc.record({ type: fc.constant("epochRead" as const) }),
  fc.record({ type: fc.constant("epochInit" as const), id: fc.constantFrom("e1", "e2"), fenceUntil: fc.constantFrom(0, 5_000) }),
  fc.record({ type: fc.constant("wipe" as const) })
)
type Op = typeof op extends fc.Arbitrary<infer A> ? A : never

/** Store time moves forward between operations: not at all, a little, or past a lease's TTL. */
const step = fc.record({ op, advanceMs: fc.constantFrom(0, 0, 1, 700, 4_000, 11_000) })
const sequence = fc.array(step, { minLength: 1, maxLength: 25 })

/** One operation on one store; the answer in a form both stores must agree on. */
const apply = (store: CoordinationShape, op: Op, now: number, wipe: Effect.Effect<void>): Effect.Effect<unknown, unknown> => {
  switch (op.type) {
    case "gate":
      return store.gate({ scope: op.scope, buckets: op.buckets, lease: op.lease, now })
    case "releaseLease":
      return store.releaseLease({ scope: op.scope, id: op.id })
    case "renewLeases":
      return store.renewLeases(op.leases, TTL_MS, now)
    case "reserve":
      return store.budgetReserve({ budget: op.budget, cap: capOf(op.budget), amount: HOLD_AMOUNTS[op.id], id: op.id, ttlMs: TTL_MS, now, expireAt: 0 })
    case "settle":
      return store.budgetSettle({ budget: op.budget, id: op.id, chargeId: op.chargeId, amount: HOLD_AMOUNTS[op.id], actual: op.actual, now })
    case "release":
      return store.budgetRelease({ budget: op.budget, id: op.id }, now)
    case "renew":
      return store.budgetRenew(op.holds.map((h) => ({ ...h, amount: HOLD_AMOUNTS[h.id] })), TTL_MS, now)
    case "charge":
      return store.budgetCharge(op.charges, now)
    case "pending":
      return Effect.map(store.budgetPendingCharges(op.budget), (ids) => [...ids].sort())
    case "seed":
      return store.budgetSeed({
        budget: op.budget, spent: op.spent, granted: op.granted, grantIds: op.grantIds, expireAt: 0, now,
        counted: op.counted, uncounted: op.uncounted, final: op.final
      })
    case "grant":
      return store.budgetGrant({ budget: op.budget, grantId: op.grantId, amount: op.amount })
    case "state":
      return Effect.all(BUDGETS.map((name) => store.budgetState(name, now)))
    case "epochRead":
      return store.epochRead()
    case "epochInit":
      return store.epochInit({ id: op.id, fenceUntil: op.fenceUntil })
    case "wipe":
      return wipe
  }
}

/** Runs one sequence on a fresh in-process store and a fresh Redis prefix; fails at the first answer that differs. */
const replay = (url: string, steps: ReadonlyArray<{ readonly op: Op; readonly advanceMs: number }>) =>
  Effect.gen(function*() {
    const prefix = uniquePrefix()
    const redis = yield* RedisClient.make({ url, prefix })
    const dropAll = redis.use("wipe", async (client) => {
      const keys = await client.keys(`${prefix}*`)
      if (keys.length > 0) await client.del(...keys)
    }).pipe(Effect.orDie)
    yield* Effect.addFinalizer(() => dropAll)
    const onRedis = yield* makeRedis.pipe(Effect.provideService(RedisClient, redis))
    const inProcess = makeInProcess()
    // Store time starts at the wall clock, so Redis's real-time key expiry stays behind it.
    let now = Date.now()
    for (const [i, { op, advanceMs }] of steps.entries()) {
      now += advanceMs
      const mine = yield* apply(inProcess, op, now, Effect.sync(() => inProcess.wipe()))
      const theirs = yield* apply(onRedis, op, now, dropAll)
      assert.deepStrictEqual(theirs, mine, `step ${i + 1} (${op.type}): Redis answered differently from the in-process store`)
    }
  }).pipe(Effect.scoped)

describe.skipIf(redisUrl === null)("coordination counters: in-process and Redis give the same answers", () => {
  it.live("generated sequences of every operation, replayed on both", () =>
    Effect.promise(() =>
      fc.assert(
        fc.asyncProperty(sequence, (steps) => Effect.runPromise(replay(redisUrl!, steps))),
        { numRuns: Number(process.env.DRIFT_RUNS ?? 150), ...(process.env.DRIFT_SEED === undefined ? {} : { seed: Number(process.env.DRIFT_SEED) }) }
      )
    ), 120_000)
})
