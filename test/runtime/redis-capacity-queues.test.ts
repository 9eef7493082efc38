/**
 * The Redis capacity queues as several gateway instances see them: each "instance" is its own
 * `makeRedisCapacityQueues` with its own connections, all under one fresh key prefix per test.
 * Real Redis and real time (the leases and heartbeats are real timers); waits are bounded by
 * `until`, never asserted to be fast.
 */
import { assert, describe, it } from "@effect/vitest"
import { Context, Deferred, Effect, Exit, Fiber, Layer, Scope } from "effect"
import { Redis } from "ioredis"
import { inject } from "vitest"
import { type CapacityQueuesShape, type Lease, QueueTimeout } from "../../src/runtime/capacity-queue-types.ts"
import { CapacityQueues } from "../../src/runtime/capacity-queues.ts"
import { makeRedisCapacityQueues, type RedisCapacityQueuesOptions } from "../../src/runtime/redis-capacity-queues.ts"
import { dropPrefix, uniquePrefix } from "../coordination/support.ts"

// Without Redis the global setup fails the run on CI (CI=true) and this suite is skipped elsewhere.
const { redisUrl } = inject("services")
const url = redisUrl ?? ""

type Options = Omit<RedisCapacityQueuesOptions, "prefix">

/** A key prefix of its own for one test, dropped when the test ends (after its instances close). */
const freshPrefix = Effect.gen(function*() {
  const prefix = uniquePrefix()
  yield* Effect.addFinalizer(() => dropPrefix(url, prefix))
  return prefix
})
/** One gateway instance: its own command and subscriber connections, closed with the scope. */
const instance = (prefix: string, options: Options) => makeRedisCapacityQueues(url, { pollIntervalMs: 100, ...options, prefix })

const viewOf = (queues: CapacityQueuesShape, placementId: string) =>
  Effect.map(queues.view(), (views) => views.find((view) => view.placementId === placementId)!)

/** Repeats `effect` until `done` (at most ~15 s, then the test fails naming `what`). */
const until = <A, E, R>(effect: Effect.Effect<A, E, R>, done: (a: A) => boolean, what: string) =>
  Effect.gen(function*() {
    for (let i = 0; i < 750; i++) {
      const value = yield* effect
      if (done(value)) return value
      yield* Effect.sleep(20)
    }
    return yield* Effect.die(new Error(`gave up waiting for: ${what}`))
  })

/** A raw connection, to play the part of a lost or stray announcement. */
const rawRedis = Effect.acquireRelease(Effect.sync(() => new Redis(url, { maxRetriesPerRequest: 1 })), (redis) => Effect.sync(() => redis.disconnect()))

const p1 = (capacity: number) => [{ placementId: "p1", capacity }]
const p1p2 = [{ placementId: "p1", capacity: 1 }, { placementId: "p2", capacity: 1 }]

describe.skipIf(redisUrl === null)("CapacityQueues on Redis (several instances)", () => {
  it.live("an enqueue behind a pending admission takes a slot only with its ticket; without one it waits for the admission", () =>
    Effect.gen(function*() {
      const prefix = yield* freshPrefix
      const queues = yield* instance(prefix, { placements: p1(1) })
      const redis = yield* rawRedis

      // No ticket (the admission refused, or is answered some other way): nothing is taken or
      // queued, and the acquire waits for the admission before it asks again.
      const asked = yield* Deferred.make<void>()
      const admitted = yield* Deferred.make<void>()
      const pending = yield* Effect.forkChild(queues.acquire({
        candidates: ["p1"],
        keyId: "k",
        admission: { ticket: "refused", admitted: Effect.andThen(Deferred.succeed(asked, undefined), Deferred.await(admitted)) }
      }))
      yield* Deferred.await(asked)
      assert.deepStrictEqual(yield* viewOf(queues, "p1"), { placementId: "p1", capacity: 1, inUse: 0, waiting: 0, waitingByKey: {}, circuit: "closed" })
      yield* Deferred.succeed(admitted, undefined)
      const late = yield* Fiber.join(pending)
      assert.strictEqual(late.placementId, "p1")
      assert.strictEqual((yield* viewOf(queues, "p1")).inUse, 1)
      yield* late.release("success")

      // The ticket the admission left: taken by the enqueue, which grants at once.
      yield* Effect.promise(() => redis.set(`${prefix}adm:admitted`, "1", "PX", 10_000))
      const lease = yield* queues.acquire({
        candidates: ["p1"],
        keyId: "k",
        admission: { ticket: "admitted", admitted: Effect.die(new Error("an admitted call does not wait for its admission")) }
      })
      assert.strictEqual(lease.placementId, "p1")
      assert.strictEqual(yield* Effect.promise(() => redis.exists(`${prefix}adm:admitted`)), 0, "the ticket is taken")
      yield* lease.release("success")
    }))

  it.live("two instances share capacity 2: 20 requests all served, never more than 2 held at once", () =>
    Effect.gen(function*() {
      const prefix = yield* freshPrefix
      const a = yield* instance(prefix, { placements: p1(2) })
      const b = yield* instance(prefix, { placements: p1(2) })
      let active = 0
      let peak = 0
      let peakInUse = 0
      const served: Array<number> = []
      const worker = (i: number) =>
        Effect.gen(function*() {
          const queues = i % 2 === 0 ? a : b
          const lease = yield* queues.acquire({ candidates: ["p1"], keyId: `key-${i % 3}` })
          peak = Math.max(peak, ++active)
          peakInUse = Math.max(peakInUse, (yield* viewOf(queues, "p1")).inUse)
          yield* Effect.sleep(20)
          active--
          served.push(i)
          yield* lease.release("success")
        })
      yield* Effect.forEach(Array.from({ length: 20 }, (_, i) => i), worker, { concurrency: "unbounded", discard: true })
      assert.strictEqual(served.length, 20)
      assert.strictEqual(peak, 2, "both slots were used, never a third")
      assert.strictEqual(peakInUse, 2, "Redis never counted more than 2 holders")
      for (const queues of [a, b]) {
        assert.deepStrictEqual(yield* viewOf(queues, "p1"), { placementId: "p1", capacity: 2, inUse: 0, waiting: 0, waitingByKey: {}, circuit: "closed" })
      }
    }))

  it.live("a flooding key on one instance and a light key on another share the slot turn by turn", () =>
    Effect.gen(function*() {
      const prefix = yield* freshPrefix
      const flooder = yield* instance(prefix, { placements: p1(1) })
      const light = yield* instance(prefix, { placements: p1(1) })
      const grants: Array<{ readonly keyId: string; readonly lease: Lease }> = []
      const request = (queues: CapacityQueuesShape, keyId: string) =>
        queues.acquire({ candidates: ["p1"], keyId }).pipe(
          Effect.tap((lease) => Effect.sync(() => grants.push({ keyId, lease }))),
          Effect.forkChild
        )
      for (let i = 0; i < 10; i++) yield* request(flooder, "flood")
      yield* until(viewOf(light, "p1"), (v) => v.inUse === 1 && v.waiting === 9, "9 flood waiters")
      for (let i = 0; i < 3; i++) yield* request(light, "light")
      yield* until(viewOf(flooder, "p1"), (v) => v.waiting === 12, "3 light waiters")
      for (let i = 0; i < 13; i++) {
        yield* until(Effect.sync(() => grants.length), (n) => n > i, `grant ${i + 1}`)
        assert.strictEqual(grants.length, i + 1, "capacity 1: one grant per release")
        yield* grants[i].lease.release("success")
      }
      assert.deepStrictEqual(grants.slice(0, 7).map((g) => g.keyId), ["flood", "flood", "light", "flood", "light", "flood", "light"])
      assert.deepInclude(yield* viewOf(light, "p1"), { inUse: 0, waiting: 0 })
    }))

  it.live("takes the first free slot on any candidate and leaves the others' queues", () =>
    Effect.gen(function*() {
      const prefix = yield* freshPrefix
      const a = yield* instance(prefix, { placements: p1p2 })
      const b = yield* instance(prefix, { placements: p1p2 })
      const holder = yield* a.acquire({ candidates: ["p1"], keyId: "k" })
      const x = yield* a.acquire({ candidates: ["p1", "p2"], keyId: "k" })
      assert.strictEqual(x.placementId, "p2")
      const y = yield* Effect.forkChild(b.acquire({ candidates: ["p1", "p2"], keyId: "k" }))
      yield* until(a.view(), (views) => views.every((v) => v.waiting === 1), "y waits on p1 and p2")
      yield* x.release("success")
      const lease = yield* Fiber.join(y)
      assert.strictEqual(lease.placementId, "p2")
      assert.deepInclude(yield* viewOf(a, "p1"), { inUse: 1, waiting: 0 }, "cancelled on the candidate that lost")
      yield* holder.release("success")
      assert.strictEqual((yield* viewOf(a, "p1")).inUse, 0, "nobody was granted the freed slot")
      yield* lease.release("success")
    }))

  it.live("granted on two candidates at once: it keeps one and the other slot comes back", () =>
    Effect.gen(function*() {
      const prefix = yield* freshPrefix
      const a = yield* instance(prefix, { placements: p1p2 })
      const b = yield* instance(prefix, { placements: p1p2 })
      const onP1 = yield* a.acquire({ candidates: ["p1"], keyId: "k" })
      const onP2 = yield* b.acquire({ candidates: ["p2"], keyId: "k" })
      const y = yield* Effect.forkChild(a.acquire({ candidates: ["p1", "p2"], keyId: "k" }))
      yield* until(b.view(), (views) => views.every((v) => v.waiting === 1), "y waits on both")
      yield* Effect.all([onP1.release("success"), onP2.release("success")], { concurrency: "unbounded" })
      const lease = yield* Fiber.join(y)
      const views = yield* until(b.view(), (vs) => vs.reduce((sum, v) => sum + v.inUse, 0) === 1, "one slot held in all")
      assert.deepStrictEqual(views.map((v) => [v.placementId, v.inUse, v.waiting]), [["p1", lease.placementId === "p1" ? 1 : 0, 0], ["p2", lease.placementId === "p2" ? 1 : 0, 0]])
      yield* lease.release("success")
      yield* lease.release("failure") // idempotent: neither a second release nor a failure counts
      assert.deepStrictEqual((yield* a.view()).map((v) => [v.inUse, v.circuit]), [[0, "closed"], [0, "closed"]])
    }))

  it.live("a grant whose announcement was lost is found by the heartbeat; a stray grant is released at once", () =>
    Effect.gen(function*() {
      const prefix = yield* freshPrefix
      const a = yield* instance(prefix, { placements: p1(1) })
      const redis = yield* rawRedis
      const base = `${prefix}cq:{p1}:`
      const holder = yield* a.acquire({ candidates: ["p1"], keyId: "k" })
      const waiter = yield* Effect.forkChild(a.acquire({ candidates: ["p1"], keyId: "k" }))
      yield* until(viewOf(a, "p1"), (v) => v.waiting === 1, "one waiter")
      // Hand the slot over by hand, as the scripts do, but announce nothing.
      const [holderId] = yield* Effect.promise(() => redis.zrange(`${base}holders`, "0", "-1"))
      const [waiterId] = yield* Effect.promise(() => redis.lrange(`${base}lane:k`, 0, -1))
      yield* Effect.promise(() =>
        redis.multi().zrem(`${base}holders`, holderId).del(`${base}lane:k`, `${base}ring`).hdel(`${base}waiters`, waiterId)
          .zrem(`${base}alive`, waiterId).zadd(`${base}holders`, String(Date.now() + 20_000), waiterId).exec()
      )
      // Bounded well below the 20 s lease given by hand, after which a re-enqueue would also serve it.
      const lease = yield* Fiber.join(waiter).pipe(Effect.timeoutOrElse({ duration: "8 seconds", orElse: () => Effect.die(new Error("the heartbeat did not find the grant")) }))
      assert.strictEqual(lease.placementId, "p1")
      yield* holder.release("failure") // its slot was taken away: nothing to free, nothing counted
      assert.deepInclude(yield* viewOf(a, "p1"), { inUse: 1, waiting: 0, circuit: "closed" })

      // A grant for a waiter of this instance that does not wait (any more) is given back.
      yield* lease.release("success")
      const instanceId = waiterId.slice(0, waiterId.indexOf("/"))
      const stray = `${instanceId}/999999`
      yield* Effect.promise(() => redis.zadd(`${base}holders`, String(Date.now() + 20_000), stray))
      assert.strictEqual((yield* viewOf(a, "p1")).inUse, 1)
      yield* Effect.promise(() => redis.publish(`${prefix}cq:grants:${instanceId}`, `p1\n${stray}`))
      yield* until(viewOf(a, "p1"), (v) => v.inUse === 0, "the stray slot is freed")
    }))

  it.live("a placement Redis forgot is seeded again from the configured capacity", () =>
    Effect.gen(function*() {
      const prefix = yield* freshPrefix
      const a = yield* instance(prefix, { placements: p1(2) })
      const redis = yield* rawRedis
      yield* Effect.promise(() => redis.del(`${prefix}cq:{p1}:meta`))
      const both = yield* Effect.all([a.acquire({ candidates: ["p1"], keyId: "k" }), a.acquire({ candidates: ["p1"], keyId: "k" })]).pipe(
        Effect.timeoutOrElse({ duration: "8 seconds", orElse: () => Effect.die(new Error("no slot after the loss")) })
      )
      assert.deepInclude(yield* viewOf(a, "p1"), { capacity: 2, inUse: 2, circuit: "closed" })
      for (const lease of both) yield* lease.release("success")
    }))

  it.live("an interrupted waiter leaves at once; the deadline fails with QueueTimeout; onQueued runs once", () =>
    Effect.gen(function*() {
      const prefix = yield* freshPrefix
      const a = yield* instance(prefix, { placements: p1(1) })
      const b = yield* instance(prefix, { placements: p1(1) })
      let queued = 0
      const onQueued = Effect.sync(() => queued++)
      const holder = yield* a.acquire({ candidates: ["p1"], keyId: "k", onQueued })
      assert.strictEqual(queued, 0, "not queued when a slot was free")
      const waiter = yield* Effect.forkChild(b.acquire({ candidates: ["p1"], keyId: "k", onQueued }))
      yield* until(viewOf(a, "p1"), (v) => v.waiting === 1, "one waiter")
      assert.strictEqual(queued, 1)
      yield* Fiber.interrupt(waiter)
      assert.deepInclude(yield* viewOf(a, "p1"), { inUse: 1, waiting: 0, waitingByKey: {} })

      const error = yield* b.acquire({ candidates: ["p1"], keyId: "k", deadlineMs: 300, onQueued }).pipe(Effect.flip)
      assert.instanceOf(error, QueueTimeout)
      assert.isAtLeast(error.waitedMs, 300)
      assert.isAtLeast(error.retryAfterSeconds, 1)
      assert.strictEqual(queued, 2)
      assert.deepInclude(yield* viewOf(b, "p1"), { inUse: 1, waiting: 0 })
      yield* holder.release("success")
      assert.deepInclude(yield* viewOf(a, "p1"), { inUse: 0, waiting: 0 }, "no slot leaked to the gone waiters")
    }))

  it.live("a crashed instance's slot comes back after the lease TTL, and its waiters are skipped", () =>
    Effect.gen(function*() {
      const prefix = yield* freshPrefix
      const options: Options = { placements: p1(1), leaseTtlMs: 2_000, leaseRenewMs: 250, waiterTtlMs: 1_500 }
      const survivor = yield* instance(prefix, options)
      const dying = yield* Scope.make()
      const doomed = yield* instance(prefix, options).pipe(Scope.provide(dying))
      yield* doomed.acquire({ candidates: ["p1"], keyId: "k" }) // never released
      const waiter = yield* Effect.forkChild(survivor.acquire({ candidates: ["p1"], keyId: "k" }))
      yield* until(viewOf(survivor, "p1"), (v) => v.inUse === 1 && v.waiting === 1, "survivor waits")
      // Longer than the TTL: the living instance keeps renewing its lease.
      yield* Effect.sleep(3_000)
      assert.isUndefined(waiter.pollUnsafe(), "a renewed lease does not lapse")
      yield* Scope.close(dying, Exit.void) // the instance dies: connections gone, nothing released
      const lease = yield* Fiber.join(waiter)
      assert.strictEqual(lease.placementId, "p1")
      assert.deepInclude(yield* viewOf(survivor, "p1"), { inUse: 1, waiting: 0 })

      // A waiter of an instance that dies is dropped once its liveness lapses, not granted.
      const dying2 = yield* Scope.make()
      const doomed2 = yield* instance(prefix, options).pipe(Scope.provide(dying2))
      const ghost = yield* Effect.forkChild(doomed2.acquire({ candidates: ["p1"], keyId: "ghost" }))
      yield* until(viewOf(survivor, "p1"), (v) => v.waiting === 1, "ghost waits")
      const live = yield* Effect.forkChild(survivor.acquire({ candidates: ["p1"], keyId: "live" }))
      yield* until(viewOf(survivor, "p1"), (v) => v.waiting === 2, "live waits")
      yield* Scope.close(dying2, Exit.void)
      const after = yield* until(viewOf(survivor, "p1"), (v) => v.waiting === 1, "ghost dropped")
      assert.deepStrictEqual(after.waitingByKey, { live: 1 })
      yield* lease.release("success")
      const next = yield* Fiber.join(live)
      assert.deepInclude(yield* viewOf(survivor, "p1"), { inUse: 1, waiting: 0 })
      assert.isUndefined(ghost.pollUnsafe())
      yield* next.release("success")
      yield* Fiber.interrupt(ghost)
    }), 30_000)

  it.live("failures open the circuit for every instance; one probe after the cooldown; its success closes it", () =>
    Effect.gen(function*() {
      const prefix = yield* freshPrefix
      const options: Options = {
        placements: [{ placementId: "p1", capacity: 2 }, { placementId: "p2", capacity: 1 }],
        failureThreshold: 2,
        probeCooldownMs: 1_500
      }
      const a = yield* instance(prefix, options)
      const b = yield* instance(prefix, options)
      for (let i = 0; i < 2; i++) yield* (yield* a.acquire({ candidates: ["p1"], keyId: "k" })).release("failure")
      assert.isTrue(yield* a.isOpen("p1"))
      // Releases are sent, not awaited: the other instance sees them a round trip later.
      yield* until(b.isOpen("p1"), (open) => open, "the failures, seen from the other instance")
      assert.isFalse(yield* b.isOpen("p2"))
      const elsewhere = yield* b.acquire({ candidates: ["p1", "p2"], keyId: "k" })
      assert.strictEqual(elsewhere.placementId, "p2", "an open placement is skipped")
      const probe = yield* Effect.forkChild(b.acquire({ candidates: ["p1"], keyId: "first" }))
      yield* until(viewOf(a, "p1"), (v) => v.waiting === 1, "the first waiter")
      const next = yield* Effect.forkChild(a.acquire({ candidates: ["p1"], keyId: "second" }))
      yield* until(viewOf(a, "p1"), (v) => v.waiting === 2, "two waiters")
      assert.deepInclude(yield* viewOf(a, "p1"), { circuit: "open", inUse: 0 }, "open grants nothing")

      // After the cooldown exactly one probe runs, though capacity is 2.
      const probeLease = yield* Fiber.join(probe)
      assert.deepInclude(yield* viewOf(a, "p1"), { circuit: "halfOpen", inUse: 1, waiting: 1 })
      assert.isFalse(yield* a.isOpen("p1"))
      yield* probeLease.release("failure")
      assert.deepInclude(yield* viewOf(b, "p1"), { circuit: "open", inUse: 0, waiting: 1 }, "a failed probe re-opens")
      assert.isTrue(yield* b.isOpen("p1"))

      const secondProbe = yield* Fiber.join(next)
      assert.strictEqual((yield* viewOf(b, "p1")).circuit, "halfOpen")
      yield* secondProbe.release("success") // a's lease: a sees it at once, b a round trip later
      assert.deepInclude(yield* viewOf(a, "p1"), { circuit: "closed", inUse: 0 })
      assert.isFalse(yield* a.isOpen("p1"))
      yield* until(viewOf(b, "p1"), (v) => v.circuit === "closed", "the closed circuit, seen from the other instance")
      assert.isFalse(yield* b.isOpen("p1"))
      // Closed again: both slots grant at once.
      const both = yield* Effect.all([a.acquire({ candidates: ["p1"], keyId: "k" }), b.acquire({ candidates: ["p1"], keyId: "k" })])
      assert.strictEqual((yield* viewOf(a, "p1")).inUse, 2)
      for (const lease of [...both, elsewhere]) yield* lease.release("success")
    }))

  it.live("a half-open placement with nobody waiting grants its one probe at once, and holds the next arrival", () =>
    Effect.gen(function*() {
      const prefix = yield* freshPrefix
      const options: Options = { placements: [{ placementId: "p1", capacity: 2 }], failureThreshold: 1, probeCooldownMs: 300 }
      const a = yield* instance(prefix, options)
      yield* (yield* a.acquire({ candidates: ["p1"], keyId: "k" })).release("failure")
      assert.isTrue(yield* a.isOpen("p1"))
      yield* until(a.isOpen("p1"), (open) => !open, "the cooldown's end")
      // The queue is empty: the enqueue itself answers with the slot (no lane, no announcement).
      const probe = yield* a.acquire({ candidates: ["p1"], keyId: "k" })
      assert.deepInclude(yield* viewOf(a, "p1"), { circuit: "halfOpen", inUse: 1, waiting: 0 })
      const next = yield* Effect.forkChild(a.acquire({ candidates: ["p1"], keyId: "other" }))
      yield* until(viewOf(a, "p1"), (v) => v.waiting === 1, "the second arrival waiting behind the probe")
      assert.strictEqual((yield* viewOf(a, "p1")).inUse, 1, "one probe, though capacity is 2")
      yield* probe.release("success")
      const granted = yield* Fiber.join(next)
      assert.deepInclude(yield* viewOf(a, "p1"), { circuit: "closed", inUse: 1, waiting: 0 })
      yield* granted.release("success")
    }))

  it.live("view numbers and setCapacity, through CapacityQueues.layerRedis", () =>
    Effect.gen(function*() {
      const prefix = yield* freshPrefix
      const layer = () => CapacityQueues.layerRedis(url, { placements: p1(3), pollIntervalMs: 100, prefix })
      const a = Context.get(yield* Layer.build(layer()), CapacityQueues)
      const b = Context.get(yield* Layer.build(layer()), CapacityQueues)
      const leases: Array<Lease> = []
      const take = (queues: CapacityQueuesShape, keyId: string) =>
        queues.acquire({ candidates: ["p1"], keyId }).pipe(Effect.tap((lease) => Effect.sync(() => leases.push(lease))))
      yield* take(a, "x")
      yield* take(a, "x")
      yield* take(b, "y")
      const waiters = [
        yield* Effect.forkChild(take(b, "a")),
        yield* Effect.forkChild(take(b, "a")),
        yield* Effect.forkChild(take(a, "b"))
      ]
      yield* until(viewOf(a, "p1"), (v) => v.waiting === 3, "three waiters")
      const expected = { placementId: "p1", capacity: 3, inUse: 3, waiting: 3, waitingByKey: { a: 2, b: 1 }, circuit: "closed" as const }
      assert.deepStrictEqual(yield* viewOf(a, "p1"), expected)
      assert.deepStrictEqual(yield* viewOf(b, "p1"), expected)

      // More capacity grants at once, fairly: one "a", then the "b".
      yield* a.setCapacity("p1", 5)
      yield* until(Effect.sync(() => leases.length), (n) => n === 5, "two more grants")
      assert.deepStrictEqual(yield* viewOf(b, "p1"), { ...expected, capacity: 5, inUse: 5, waiting: 1, waitingByKey: { a: 1 } })
      // Less capacity preempts nobody, and grants nothing until below it.
      yield* b.setCapacity("p1", 4)
      for (const lease of leases.splice(0, 1)) yield* lease.release("success")
      assert.deepInclude(yield* viewOf(a, "p1"), { capacity: 4, inUse: 4, waiting: 1 })
      for (const lease of leases.splice(0, 1)) yield* lease.release("success")
      yield* until(Effect.sync(() => leases.length), (n) => n === 4, "the last waiter")
      for (const lease of leases.splice(0)) yield* lease.release("success")
      yield* Effect.forEach(waiters, Fiber.join)
      // Seen at once on the releasing instance's connection; another instance sees it a round trip later.
      assert.deepStrictEqual(yield* viewOf(a, "p1"), { ...expected, capacity: 4, inUse: 0, waiting: 0, waitingByKey: {} })
      yield* until(viewOf(b, "p1"), (v) => v.inUse === 0, "the releases, seen from the other instance")
      assert.deepStrictEqual(yield* viewOf(b, "p1"), { ...expected, capacity: 4, inUse: 0, waiting: 0, waitingByKey: {} })
    }))
})
