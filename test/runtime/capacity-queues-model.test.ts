/**
 * Drives the real CapacityQueues service along the paths `xstate/graph` generates from the pure
 * queue machine, and checks after every step that the hosted queue shows exactly the model's
 * state: slots, waiters per key, circuit, and which requests hold a lease.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit, Fiber } from "effect"
import { TestClock } from "effect/testing"
import { TestModel } from "xstate/graph"
import { queueContents, queueLogic, type QueueEvent, type QueueState, queueView } from "../../machines/queue.ts"
import type { Lease, QueueTimeout } from "../../src/runtime/capacity-queue-types.ts"
import { CapacityQueues } from "../../src/runtime/capacity-queues.ts"
import { queueEvents, serializeQueue } from "../machines/queue-model.ts"

const cooldownMs = 30_000
const input = { capacity: 1, failureThreshold: 2 }
const events = queueEvents({ waiters: 3, keys: ["a", "b"], capacities: [1, 2] })
const paths = new TestModel(queueLogic, {
  events: (snapshot) => events(snapshot.context),
  serializeState: (snapshot) => serializeQueue(snapshot.context),
  serializeTransition: () => "",
  input
}).getShortestPaths()

const settle = Effect.yieldNow.pipe(Effect.repeat({ times: 10 }))

/** Replays one path; returns how many steps were checked. */
const replay = (steps: ReadonlyArray<{ readonly event: QueueEvent; readonly state: QueueState }>) =>
  Effect.gen(function*() {
    const queues = yield* CapacityQueues
    const requests = new Map<string, Fiber.Fiber<Lease, QueueTimeout>>()
    const gone = new Set<string>()
    const leaseOf = (waiterId: string) => {
      const exit = requests.get(waiterId)!.pollUnsafe()
      return exit !== undefined && Exit.isSuccess(exit) ? exit.value : undefined
    }
    for (const { event, state } of steps) {
      switch (event.type) {
        case "ENQUEUE":
          requests.set(event.waiterId, yield* Effect.forkChild(queues.acquire({ candidates: ["p1"], keyId: event.keyId })))
          break
        case "CANCEL": {
          const lease = leaseOf(event.waiterId)
          if (lease === undefined) yield* Fiber.interrupt(requests.get(event.waiterId)!)
          else yield* lease.release("cancelled")
          gone.add(event.waiterId)
          break
        }
        case "RELEASE":
          yield* leaseOf(event.waiterId)!.release(event.outcome)
          gone.add(event.waiterId)
          break
        case "CAPACITY":
          yield* queues.setCapacity("p1", event.capacity)
          break
        case "CIRCUIT_PROBE_DUE":
          yield* TestClock.adjust(cooldownMs)
          break
      }
      yield* settle
      const [{ placementId: _, ...hosted }] = yield* queues.view()
      const step = `after ${JSON.stringify(event)} in ${serializeQueue(state)}`
      assert.deepStrictEqual(hosted, queueView(state), step)
      const holding = [...requests.keys()].filter((id) => !gone.has(id) && leaseOf(id) !== undefined)
      assert.sameMembers(holding, [...queueContents(state.context).holders], step)
    }
    return steps.length
  }).pipe(Effect.provide(CapacityQueues.layerTest({ placements: [{ placementId: "p1", ...input }], ...input, probeCooldownMs: cooldownMs })))

describe("CapacityQueues follows the queue model", () => {
  it("the generated paths cover the circuit and the fairness ring", () => {
    assert.isAbove(paths.length, 50)
    const values = new Set(paths.map((path) => path.state.context.value as string))
    assert.sameMembers([...values], ["closed", "open", "halfOpen"])
  })

  it.effect("every generated path, replayed against the hosted queues", () =>
    Effect.gen(function*() {
      let checked = 0
      for (const path of paths) {
        const steps = path.steps.filter((step) => !step.event.type.startsWith("xstate."))
        checked += yield* replay(steps.map((step) => ({ event: step.event as QueueEvent, state: step.state.context })))
      }
      assert.isAbove(checked, paths.length)
    }))
})
