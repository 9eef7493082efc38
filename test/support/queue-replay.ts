/**
 * One replay of the queue model against a CapacityQueues service, whichever hosts it: the paths
 * `xstate/graph` generates from the pure queue machine (machines/queue.ts), each event turned into
 * the service call it stands for, and after every step a check that the service shows exactly the
 * model's state (slots, waiters per key, circuit, capacity) and that the requests holding a lease
 * are the model's holders. The in-process queues and the Redis ones (whose rules are Lua) are both
 * replayed through this, so they are held to the same model by the same steps.
 */
import { assert } from "@effect/vitest"
import { Effect, Exit, Fiber } from "effect"
import { TestModel } from "xstate/graph"
import { queueContents, queueLogic, type QueueEvent, type QueueState, queueView } from "../../machines/queue.ts"
import type { CapacityQueuesShape, Lease, QueueTimeout } from "../../src/runtime/capacity-queue-types.ts"
import { type QueueModelBounds, queueEvents, serializeQueue } from "../machines/queue-model.ts"

export interface ReplayStep {
  readonly event: QueueEvent
  readonly state: QueueState
}

export interface QueuePath {
  /** Where the path ends. */
  readonly state: QueueState
  readonly steps: ReadonlyArray<ReplayStep>
}

/** The model's shortest paths from `input`, as the steps to replay (xstate's own events dropped). */
export const queuePaths = (
  input: { readonly capacity: number; readonly failureThreshold: number },
  bounds: QueueModelBounds,
  keep: (event: QueueEvent) => boolean = () => true
): ReadonlyArray<QueuePath> => {
  const events = queueEvents(bounds)
  return new TestModel(queueLogic, {
    events: (snapshot) => events(snapshot.context).filter(keep),
    serializeState: (snapshot) => serializeQueue(snapshot.context),
    serializeTransition: () => "",
    input
  }).getShortestPaths().map((path) => ({
    state: path.state.context as QueueState,
    steps: path.steps
      .filter((step) => !step.event.type.startsWith("xstate."))
      .map((step) => ({ event: step.event as QueueEvent, state: step.state.context as QueueState }))
  }))
}

/** What a replay drives, and how a step's effects are awaited where the service is asynchronous. */
export interface ReplayTarget {
  /** The service's instances; arrivals alternate among them, capacity is set on the first. */
  readonly instances: ReadonlyArray<CapacityQueuesShape>
  /** Makes the circuit's cooldown pass (a test clock moved, or nothing where it passes in real time). */
  readonly cooldown: Effect.Effect<void>
  /**
   * Reads `read` until `done` holds or the target gives up, and answers the last reading: once
   * after the fibers have run where everything is in process; polled where grants travel over
   * pub/sub.
   */
  readonly awaitState: <A>(read: Effect.Effect<A>, done: (value: A) => boolean) => Effect.Effect<A>
}

/** Replays one path; returns how many steps were checked. */
export const replayPath = (target: ReplayTarget, { steps }: QueuePath) =>
  Effect.gen(function*() {
    const [first] = target.instances
    const requests = new Map<string, Fiber.Fiber<Lease, QueueTimeout>>()
    const gone = new Set<string>()
    const leaseOf = (waiterId: string) => {
      const exit = requests.get(waiterId)!.pollUnsafe()
      return exit !== undefined && Exit.isSuccess(exit) ? exit.value : undefined
    }
    const holding = Effect.sync(() => [...requests.keys()].filter((id) => !gone.has(id) && leaseOf(id) !== undefined))
    for (const { event, state } of steps) {
      const step = `after ${JSON.stringify(event)} in ${serializeQueue(state)}`
      switch (event.type) {
        case "ENQUEUE": {
          const on = target.instances[requests.size % target.instances.length]
          requests.set(event.waiterId, yield* Effect.forkChild(on.acquire({ candidates: ["p1"], keyId: event.keyId, priority: event.priority })))
          break
        }
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
          yield* first.setCapacity("p1", event.capacity)
          break
        case "CIRCUIT_PROBE_DUE":
          yield* target.cooldown
          break
      }
      const want = queueView(state)
      const hosted = yield* target.awaitState(
        Effect.map(first.view(), ([{ placementId: _, ...view }]) => view),
        (view) => JSON.stringify(view) === JSON.stringify(want)
      )
      assert.deepStrictEqual(hosted, want, step)
      const holders = queueContents(state.context).holders
      assert.sameMembers(yield* target.awaitState(holding, (ids) => ids.length === holders.length), [...holders], step)
    }
    // Waiters still waiting leave before the instances go.
    yield* Fiber.interruptAll([...requests.values()])
    return steps.length
  })
