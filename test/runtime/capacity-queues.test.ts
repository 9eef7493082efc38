import { assert, describe, it } from "@effect/vitest"
import { Deferred, Effect, Exit, Fiber } from "effect"
import { TestClock } from "effect/testing"
import { type CapacityQueuesOptions, QueueTimeout } from "../../src/runtime/capacity-queue-types.ts"
import { CapacityQueues } from "../../src/runtime/capacity-queues.ts"

const withQueues = (options: CapacityQueuesOptions) => <A, E>(effect: Effect.Effect<A, E, CapacityQueues>) =>
  Effect.provide(effect, CapacityQueues.layerTest(options))
const one = (capacity: number) => ({ placements: [{ placementId: "p1", capacity }] })
const two = { placements: [{ placementId: "p1", capacity: 1 }, { placementId: "p2", capacity: 1 }] }

const viewOf = (placementId: string) =>
  Effect.gen(function*() {
    const queues = yield* CapacityQueues
    return (yield* queues.view()).find((view) => view.placementId === placementId)!
  })
/** Lets forked fibers run up to their next wait. */
const settle = Effect.yieldNow.pipe(Effect.repeat({ times: 20 }))

describe("CapacityQueues", () => {
  it.effect("20 concurrent requests on capacity 2: all served, never more than 2 at once", () =>
    Effect.gen(function*() {
      const queues = yield* CapacityQueues
      let active = 0
      let peak = 0
      const worker = (i: number) =>
        Effect.gen(function*() {
          const lease = yield* queues.acquire({ candidates: ["p1"], keyId: `key-${i % 3}` })
          peak = Math.max(peak, ++active, (yield* viewOf("p1")).inUse)
          yield* Effect.sleep(100)
          active--
          yield* lease.release("success")
          return i
        })
      const fiber = yield* Effect.forkChild(Effect.forEach(Array.from({ length: 20 }, (_, i) => i), worker, { concurrency: "unbounded" }))
      yield* TestClock.adjust("2 seconds")
      assert.strictEqual((yield* Fiber.join(fiber)).length, 20)
      assert.strictEqual(peak, 2)
      assert.deepInclude(yield* viewOf("p1"), { inUse: 0, waiting: 0, circuit: "closed" })
    }).pipe(withQueues(one(2))))

  it.effect("takes the first free slot on any candidate and leaves the others' queues", () =>
    Effect.gen(function*() {
      const queues = yield* CapacityQueues
      const a = yield* queues.acquire({ candidates: ["p1"], keyId: "k" })
      const b = yield* queues.acquire({ candidates: ["p1", "p2"], keyId: "k" })
      assert.strictEqual(b.placementId, "p2")
      const c = yield* Effect.forkChild(queues.acquire({ candidates: ["p1", "p2"], keyId: "k" }))
      yield* settle
      assert.strictEqual((yield* viewOf("p1")).waiting, 1)
      assert.strictEqual((yield* viewOf("p2")).waiting, 1)
      yield* b.release("success")
      const lease = yield* Fiber.join(c)
      assert.strictEqual(lease.placementId, "p2")
      assert.strictEqual((yield* viewOf("p1")).waiting, 0, "cancelled on the candidate that lost")
      yield* a.release("success")
      assert.strictEqual((yield* viewOf("p1")).inUse, 0, "nobody was granted the freed slot")
    }).pipe(withQueues(two)))

  it.effect("an interrupted waiter leaves at once and its slot is not leaked", () =>
    Effect.gen(function*() {
      const queues = yield* CapacityQueues
      const holder = yield* queues.acquire({ candidates: ["p1"], keyId: "k" })
      const waiter = yield* Effect.forkChild(queues.acquire({ candidates: ["p1"], keyId: "k" }))
      yield* settle
      assert.strictEqual((yield* viewOf("p1")).waiting, 1)
      yield* Fiber.interrupt(waiter)
      assert.strictEqual((yield* viewOf("p1")).waiting, 0)
      yield* holder.release("success")
      assert.strictEqual((yield* viewOf("p1")).inUse, 0)
    }).pipe(withQueues(one(1))))

  it.effect("an acquire behind a pending admission asks for nothing until the call is admitted", () =>
    Effect.gen(function*() {
      const queues = yield* CapacityQueues
      const admitted = yield* Deferred.make<void>()
      const pending = yield* Effect.forkChild(queues.acquire({ candidates: ["p1"], keyId: "k", admission: { ticket: "t", admitted: Deferred.await(admitted) } }))
      yield* settle
      assert.deepInclude(yield* viewOf("p1"), { inUse: 0, waiting: 0 })
      yield* Deferred.succeed(admitted, undefined)
      const lease = yield* Fiber.join(pending)
      assert.strictEqual((yield* viewOf("p1")).inUse, 1)
      yield* lease.release("success")
    }).pipe(withQueues(one(1))))

  it.effect("release is idempotent", () =>
    Effect.gen(function*() {
      const queues = yield* CapacityQueues
      const a = yield* queues.acquire({ candidates: ["p1"], keyId: "k" })
      const b = yield* queues.acquire({ candidates: ["p1"], keyId: "k" })
      const c = yield* Effect.forkChild(queues.acquire({ candidates: ["p1"], keyId: "k" }))
      const d = yield* Effect.forkChild(queues.acquire({ candidates: ["p1"], keyId: "k" }))
      yield* settle
      yield* a.release("success")
      yield* a.release("success")
      yield* settle
      assert.deepInclude(yield* viewOf("p1"), { inUse: 2, waiting: 1 })
      assert.isTrue(Exit.isSuccess((yield* Fiber.await(c))))
      yield* Fiber.interrupt(d)
      yield* b.release("success")
    }).pipe(withQueues(one(2))))

  it.effect("the deadline fails the wait with QueueTimeout (default 10 minutes)", () =>
    Effect.gen(function*() {
      const queues = yield* CapacityQueues
      yield* queues.acquire({ candidates: ["p1"], keyId: "k" })
      const short = yield* Effect.forkChild(queues.acquire({ candidates: ["p1"], keyId: "k", deadlineMs: 5_000 }))
      const long = yield* Effect.forkChild(queues.acquire({ candidates: ["p1"], keyId: "k" }))
      yield* TestClock.adjust(4_999)
      assert.isUndefined(short.pollUnsafe())
      yield* TestClock.adjust(1)
      const error = yield* Fiber.join(short).pipe(Effect.flip)
      assert.instanceOf(error, QueueTimeout)
      assert.isAtLeast(error.retryAfterSeconds, 1)
      yield* TestClock.adjust("9 minutes")
      assert.isUndefined(long.pollUnsafe())
      yield* TestClock.adjust("1 minute")
      assert.instanceOf(yield* Fiber.join(long).pipe(Effect.flip), QueueTimeout)
      assert.strictEqual((yield* viewOf("p1")).waiting, 0)
    }).pipe(withQueues(one(1))))

  it.effect("onQueued runs once, and only when the request has to wait", () =>
    Effect.gen(function*() {
      const queues = yield* CapacityQueues
      let queued = 0
      const onQueued = Effect.sync(() => queued++)
      const first = yield* queues.acquire({ candidates: ["p1"], keyId: "k", onQueued })
      assert.strictEqual(queued, 0)
      const second = yield* Effect.forkChild(queues.acquire({ candidates: ["p1"], keyId: "k", onQueued }))
      yield* settle
      assert.strictEqual(queued, 1)
      yield* first.release("success")
      yield* (yield* Fiber.join(second)).release("success")
      assert.strictEqual(queued, 1)
    }).pipe(withQueues(one(1))))

  it.effect("a flooding key and a light key share the slot turn by turn", () =>
    Effect.gen(function*() {
      const queues = yield* CapacityQueues
      const order: Array<string> = []
      const request = (keyId: string) =>
        queues.acquire({ candidates: ["p1"], keyId }).pipe(
          Effect.tap(() => Effect.sync(() => order.push(keyId))),
          Effect.flatMap((lease) => Effect.sleep(1_000).pipe(Effect.andThen(lease.release("success")))),
          Effect.forkChild
        )
      for (let i = 0; i < 10; i++) yield* request("flood")
      yield* settle
      for (let i = 0; i < 3; i++) yield* request("light")
      yield* TestClock.adjust("20 seconds")
      assert.deepStrictEqual(order.slice(0, 7), ["flood", "flood", "light", "flood", "light", "flood", "light"])
      assert.strictEqual(order.length, 13)
    }).pipe(withQueues(one(1))))

  it.effect("failures open the circuit; after the cooldown one probe runs; its success closes it", () =>
    Effect.gen(function*() {
      const queues = yield* CapacityQueues
      for (let i = 0; i < 3; i++) yield* (yield* queues.acquire({ candidates: ["p1"], keyId: "k" })).release("failure")
      assert.isTrue(yield* queues.isOpen("p1"))
      const elsewhere = yield* queues.acquire({ candidates: ["p1", "p2"], keyId: "k" })
      assert.strictEqual(elsewhere.placementId, "p2", "an open placement is skipped")
      const probe = yield* Effect.forkChild(queues.acquire({ candidates: ["p1"], keyId: "k" }))
      const next = yield* Effect.forkChild(queues.acquire({ candidates: ["p1"], keyId: "k" }))
      yield* TestClock.adjust(29_999)
      assert.isUndefined(probe.pollUnsafe(), "open grants nothing")
      yield* TestClock.adjust(1)
      const lease = yield* Fiber.join(probe)
      assert.strictEqual((yield* viewOf("p1")).circuit, "halfOpen")
      yield* lease.release("failure")
      assert.strictEqual((yield* viewOf("p1")).circuit, "open", "a failed probe re-opens")
      yield* TestClock.adjust(30_000)
      yield* (yield* Fiber.join(next)).release("success")
      assert.deepInclude(yield* viewOf("p1"), { circuit: "closed", inUse: 0 })
      yield* elsewhere.release("success")
    }).pipe(withQueues({ ...two, failureThreshold: 3, probeCooldownMs: 30_000 })))
})
