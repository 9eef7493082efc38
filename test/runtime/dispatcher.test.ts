import { assert, describe, it } from "@effect/vitest"
import { Effect, Fiber, Layer, Stream } from "effect"
import { TestClock } from "effect/testing"
import { BackendError } from "../../src/backends/backend.ts"
import { eventOrderViolation } from "../../src/model/event-order.ts"
import { QueueTimeout } from "../../src/runtime/capacity-queue-types.ts"
import { CapacityQueues } from "../../src/runtime/capacity-queues.ts"
import { Dispatcher, type DispatchOptions } from "../../src/runtime/dispatcher.ts"
import { badRequest, inToolCall, type Play, rateLimited, scripted, serverError, textSoFar } from "./scripted.ts"

const queuesLayer = CapacityQueues.layerTest({
  placements: [{ placementId: "p1", capacity: 1 }, { placementId: "p2", capacity: 1 }],
  failureThreshold: 3,
  probeCooldownMs: 30_000
})
const withDispatcher = <A, E>(effect: Effect.Effect<A, E, Dispatcher | CapacityQueues>) =>
  Effect.provide(effect, Dispatcher.layerWith({}).pipe(Layer.provideMerge(queuesLayer)))

const two = (p1: ReadonlyArray<Play>, p2: ReadonlyArray<Play>, resume?: ReadonlyArray<Play>) =>
  scripted([
    { placementId: "p1", modelId: "svc-one", plays: p1 },
    { placementId: "p2", modelId: "svc-two", plays: p2, ...(resume === undefined ? {} : { resume }) }
  ])
const ok: Play = { kind: "answer", text: "hi" }
const fail = (error: BackendError): Play => ({ kind: "fail", error })

/** Dispatches and collects the whole stream. */
const run = (options: Omit<DispatchOptions, "keyId">) =>
  Effect.gen(function*() {
    const dispatched = yield* (yield* Dispatcher).dispatch({ keyId: "k", ...options })
    const events = yield* Stream.runCollect(dispatched.events)
    return { ...dispatched, events }
  })

const viewOf = (placementId: string) =>
  Effect.gen(function*() {
    return (yield* (yield* CapacityQueues).view()).find((view) => view.placementId === placementId)!
  })
const settle = Effect.yieldNow.pipe(Effect.repeat({ times: 20 }))

/** Every slot is back, on every placement. */
const assertNoLeases = Effect.gen(function*() {
  for (const view of yield* (yield* CapacityQueues).view()) assert.deepInclude(view, { inUse: 0, waiting: 0 }, view.placementId)
})

describe("Dispatcher", () => {
  it.effect("serves from the first candidate and releases the slot at the end", () =>
    Effect.gen(function*() {
      const { candidates, calls } = two([ok], [ok])
      const result = yield* run({ candidates })
      assert.strictEqual(result.servedModel, "svc-one")
      assert.isUndefined(eventOrderViolation(result.events))
      assert.deepStrictEqual(calls, ["p1"])
      yield* assertNoLeases
    }).pipe(withDispatcher))

  it.effect("fails over to the next candidate at once; servedModel names who answered", () =>
    Effect.gen(function*() {
      const { candidates, calls } = two([fail(serverError)], [ok])
      const result = yield* run({ candidates })
      assert.strictEqual(result.servedModel, "svc-two")
      assert.deepStrictEqual(calls, ["p1", "p2"])
      yield* assertNoLeases
    }).pipe(withDispatcher))

  it.effect("retries a retryable failure after the backoff (0.8–1.2 s)", () =>
    Effect.gen(function*() {
      const { candidates, calls } = two([fail(serverError), ok], [ok])
      const fiber = yield* Effect.forkChild(run({ candidates: candidates.slice(0, 1) }))
      yield* TestClock.adjust(799)
      assert.deepStrictEqual(calls, ["p1"])
      yield* TestClock.adjust(401)
      assert.strictEqual((yield* Fiber.join(fiber)).servedModel, "svc-one")
      assert.deepStrictEqual(calls, ["p1", "p1"])
      yield* assertNoLeases
    }).pipe(withDispatcher))

  it.effect("a 429 waits exactly retry-after", () =>
    Effect.gen(function*() {
      const { candidates, calls } = two([fail(rateLimited(7)), ok], [ok])
      const fiber = yield* Effect.forkChild(run({ candidates: candidates.slice(0, 1) }))
      yield* TestClock.adjust(6_999)
      assert.deepStrictEqual(calls, ["p1"])
      yield* TestClock.adjust(1)
      yield* Fiber.join(fiber)
      assert.deepStrictEqual(calls, ["p1", "p1"])
    }).pipe(withDispatcher))

  it.effect("a 429 asking for more than a minute is not waited out: failed over, else ended with it at once", () =>
    Effect.gen(function*() {
      const { candidates, calls } = two([fail(rateLimited(3_600)), ok], [ok])
      const servedBy = yield* run({ candidates })
      assert.strictEqual(servedBy.servedModel, "svc-two")
      const alone = two([fail(rateLimited(3_600)), ok], [ok])
      // No clock moves: the answer is the upstream's 429 (its retry-after passed on), not a wait.
      const error = yield* run({ candidates: alone.candidates.slice(0, 1) }).pipe(Effect.flip)
      assert.strictEqual((error as BackendError).retryAfterSeconds, 3_600)
      assert.deepStrictEqual([calls, alone.calls], [["p1", "p2"], ["p1"]])
      yield* assertNoLeases
    }).pipe(withDispatcher))

  it.effect("does not retry a non-retryable error, nor fail it over", () =>
    Effect.gen(function*() {
      const { candidates, calls } = two([fail(badRequest)], [ok])
      const error = yield* run({ candidates }).pipe(Effect.flip)
      assert.strictEqual(error, badRequest)
      assert.deepStrictEqual(calls, ["p1"])
      yield* assertNoLeases
    }).pipe(withDispatcher))

  it.effect("gives up after five attempts in total", () =>
    Effect.gen(function*() {
      const { candidates, calls } = two([fail(serverError)], [fail(serverError)])
      const fiber = yield* Effect.forkChild(run({ candidates }).pipe(Effect.flip))
      yield* TestClock.adjust("1 minute")
      assert.strictEqual(yield* Fiber.join(fiber), serverError)
      assert.deepStrictEqual(calls, ["p1", "p2", "p1", "p2", "p1"])
      yield* assertNoLeases
    }).pipe(withDispatcher))

  it.effect("a text stream that breaks continues on another candidate, spliced into one message", () =>
    Effect.gen(function*() {
      const { candidates, calls } = two([{ kind: "break", events: textSoFar("svc-one", "Hello "), error: serverError }], [ok], [
        { kind: "answer", text: "world" }
      ])
      const continued: Array<string> = []
      const result = yield* run({ candidates, onContinue: (to) => Effect.sync(() => continued.push(to.placementId)) })
      assert.strictEqual(result.servedModel, "svc-one")
      assert.deepStrictEqual(calls, ["p1", "p2+resume(Hello )"])
      assert.deepStrictEqual(continued, ["p2"])
      assert.isUndefined(eventOrderViolation(result.events))
      const text = result.events.flatMap((e) => (e.type === "text_delta" ? [e.text] : [])).join("")
      assert.strictEqual(text, "Hello world")
      yield* assertNoLeases
    }).pipe(withDispatcher))

  it.effect("a break inside a tool call ends the stream with the error", () =>
    Effect.gen(function*() {
      const { candidates, calls } = two([{ kind: "break", events: inToolCall("svc-one"), error: serverError }], [ok], [ok])
      const dispatched = yield* (yield* Dispatcher).dispatch({ keyId: "k", candidates })
      const error = yield* Stream.runCollect(dispatched.events).pipe(Effect.flip)
      assert.strictEqual(error, serverError)
      assert.deepStrictEqual(calls, ["p1"])
      yield* assertNoLeases
    }).pipe(withDispatcher))

  it.effect("a text break with no candidate left ends with the error", () =>
    Effect.gen(function*() {
      const { candidates } = two([{ kind: "break", events: textSoFar("svc-one", "Hel"), error: serverError }], [ok])
      const dispatched = yield* (yield* Dispatcher).dispatch({ keyId: "k", candidates }) // p2 has no resume
      assert.instanceOf(yield* Stream.runCollect(dispatched.events).pipe(Effect.flip), BackendError)
      yield* assertNoLeases
    }).pipe(withDispatcher))

  it.effect("a client that stops reading releases the slot", () =>
    Effect.gen(function*() {
      const { candidates } = two([ok], [ok])
      const dispatched = yield* (yield* Dispatcher).dispatch({ keyId: "k", candidates })
      assert.strictEqual((yield* Stream.runCollect(Stream.take(dispatched.events, 2))).length, 2)
      yield* assertNoLeases
    }).pipe(withDispatcher))

  it.effect("skips a placement whose circuit is open", () =>
    Effect.gen(function*() {
      const queues = yield* CapacityQueues
      for (let i = 0; i < 3; i++) yield* (yield* queues.acquire({ candidates: ["p1"], keyId: "x" })).release("failure")
      const { candidates, calls } = two([ok], [ok])
      assert.strictEqual((yield* run({ candidates })).servedModel, "svc-two")
      assert.deepStrictEqual(calls, ["p2"])
    }).pipe(withDispatcher))

  it.effect("waits for a slot, tells the caller once, and times out with QueueTimeout", () =>
    Effect.gen(function*() {
      const held = yield* (yield* CapacityQueues).acquire({ candidates: ["p1"], keyId: "x" })
      const { candidates, calls } = two([ok], [ok])
      let queued = 0
      const fiber = yield* Effect.forkChild(run({ candidates: candidates.slice(0, 1), deadlineMs: 5_000, onQueued: Effect.sync(() => queued++) }).pipe(Effect.flip))
      yield* TestClock.adjust(5_000)
      assert.instanceOf(yield* Fiber.join(fiber), QueueTimeout)
      assert.strictEqual(queued, 1)
      assert.deepStrictEqual(calls, [])
      yield* held.release("success")
      yield* assertNoLeases
    }).pipe(withDispatcher))

  it.effect("an interrupted dispatch (client gone) leaves the queue, or frees the slot it held", () =>
    Effect.gen(function*() {
      const held = yield* (yield* CapacityQueues).acquire({ candidates: ["p1"], keyId: "x" })
      const { candidates } = two([{ kind: "hang" }], [ok])
      const queued = yield* Effect.forkChild(run({ candidates: candidates.slice(0, 1) }))
      yield* settle
      assert.strictEqual((yield* viewOf("p1")).waiting, 1)
      yield* Fiber.interrupt(queued)
      assert.strictEqual((yield* viewOf("p1")).waiting, 0)
      yield* held.release("success")
      const calling = yield* Effect.forkChild(run({ candidates: candidates.slice(0, 1) }))
      yield* settle
      assert.strictEqual((yield* viewOf("p1")).inUse, 1, "waiting for the first byte")
      yield* Fiber.interrupt(calling)
      yield* assertNoLeases
    }).pipe(withDispatcher))

  it.effect("failures reported by the dispatcher open the placement's circuit", () =>
    Effect.gen(function*() {
      const { candidates, calls } = two([fail(serverError)], [ok])
      for (let i = 0; i < 4; i++) assert.strictEqual((yield* run({ candidates })).servedModel, "svc-two")
      assert.deepStrictEqual(calls, ["p1", "p2", "p1", "p2", "p1", "p2", "p2"])
      assert.strictEqual((yield* viewOf("p1")).circuit, "open")
    }).pipe(withDispatcher))
})
