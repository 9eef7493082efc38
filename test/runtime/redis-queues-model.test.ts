/**
 * The queue rules exist twice: as the pure transition function (machines/queue.ts) and as Lua on
 * Redis (runtime/queue-lua.ts). This replays the paths `xstate/graph` generates from the pure
 * rules against the Redis-backed CapacityQueues, two instances sharing one prefix, and checks after
 * every step that Redis shows exactly the model's state: slots in use, waiters per key, circuit,
 * capacity, and which requests hold a lease. Drift between the two definitions fails here.
 *
 * Real Redis and real time: a step is applied, then the hosted view is polled until it matches
 * (grants travel over pub/sub); a cooldown is a short real wait, polled the same way.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit, Fiber } from "effect"
import { inject } from "vitest"
import { TestModel } from "xstate/graph"
import { queueContents, queueLogic, type QueueEvent, type QueueState, queueView } from "../../machines/queue.ts"
import type { CapacityQueuesShape, Lease, QueueTimeout } from "../../src/runtime/capacity-queue-types.ts"
import { makeRedisCapacityQueues } from "../../src/runtime/redis-capacity-queues.ts"
import { dropPrefix, uniquePrefix } from "../coordination/support.ts"
import { queueEvents, serializeQueue } from "../machines/queue-model.ts"

const { redisUrl } = inject("services")
const url = redisUrl ?? ""

// An open circuit turns half-open by itself after the cooldown, so a step that ends "open" must be
// seen within it: 150 ms was missed on a loaded machine. Paths replay at once (below), so the
// 20 cooldown steps that wait it out cost little.
const cooldownMs = 1_000
const input = { capacity: 1, failureThreshold: 2 }
const events = queueEvents({ waiters: 3, keys: ["a", "b"], capacities: [1, 2] })
const paths = new TestModel(queueLogic, {
  events: (snapshot) => events(snapshot.context),
  serializeState: (snapshot) => serializeQueue(snapshot.context),
  serializeTransition: () => "",
  input
}).getShortestPaths()

/** Polls the hosted view until it equals the model's (at most ~3 s). */
const matches = (queues: CapacityQueuesShape, state: QueueState, step: string) =>
  Effect.gen(function*() {
    const want = queueView(state)
    let last: unknown
    for (let i = 0; i < 150; i++) {
      const [{ placementId: _, ...hosted }] = yield* queues.view()
      last = hosted
      if (JSON.stringify(hosted) === JSON.stringify(want)) return
      yield* Effect.sleep(20)
    }
    assert.deepStrictEqual(last, want, step)
  })

/** Replays one path on two instances (waiters alternate between them); returns the steps checked. */
const replay = (steps: ReadonlyArray<{ readonly event: QueueEvent; readonly state: QueueState }>, start = input) =>
  Effect.scoped(Effect.gen(function*() {
    const prefix = uniquePrefix()
    yield* Effect.addFinalizer(() => dropPrefix(url, prefix))
    const options = { placements: [{ placementId: "p1", capacity: start.capacity }], ...start, probeCooldownMs: cooldownMs, pollIntervalMs: 50, prefix }
    const instances = [yield* makeRedisCapacityQueues(url, options), yield* makeRedisCapacityQueues(url, options)]
    const requests = new Map<string, Fiber.Fiber<Lease, QueueTimeout>>()
    const gone = new Set<string>()
    const leaseOf = (waiterId: string) => {
      const exit = requests.get(waiterId)!.pollUnsafe()
      return exit !== undefined && Exit.isSuccess(exit) ? exit.value : undefined
    }
    for (const { event, state } of steps) {
      const step = `after ${JSON.stringify(event)} in ${serializeQueue(state)}`
      switch (event.type) {
        case "ENQUEUE": {
          const on = instances[requests.size % 2]
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
          yield* instances[0].setCapacity("p1", event.capacity)
          break
        case "CIRCUIT_PROBE_DUE":
          // Nothing to send: the cooldown passes in real time, and `matches` below polls until the
          // hosted view shows the model's state after it (half-open, or the probe granted).
          break
      }
      yield* matches(instances[0], state, step)
      // The leases the requests hold must be the model's holders (a grant travels over pub/sub).
      for (let i = 0; i < 150; i++) {
        const holding = [...requests.keys()].filter((id) => !gone.has(id) && leaseOf(id) !== undefined)
        if (holding.length === queueContents(state.context).holders.length) break
        yield* Effect.sleep(20)
      }
      const holding = [...requests.keys()].filter((id) => !gone.has(id) && leaseOf(id) !== undefined)
      assert.sameMembers(holding, [...queueContents(state.context).holders], step)
    }
    // Waiters still waiting leave before the instances' connections close.
    yield* Fiber.interruptAll([...requests.values()])
    return steps.length
  }))

/**
 * Replays every path; returns the steps checked. Paths are independent (each has its own prefix
 * and instances) and a replay mostly waits on Redis round trips and pub/sub, so a few run at once.
 */
const replayAll = (all: typeof paths, start: typeof input) =>
  Effect.forEach(all, (path) => {
    const steps = path.steps.filter((step) => !step.event.type.startsWith("xstate."))
    return replay(steps.map((step) => ({ event: step.event as QueueEvent, state: step.state.context })), start)
  }, { concurrency: 4 }).pipe(Effect.map((counts) => counts.reduce((sum, n) => sum + n, 0)))

describe.skipIf(redisUrl === null)("Redis CapacityQueues follow the queue model", () => {
  it("the generated paths cover the circuit and the fairness ring", () => {
    assert.isAbove(paths.length, 50)
    assert.sameMembers([...new Set(paths.map((path) => path.state.context.value as string))], ["closed", "open", "halfOpen"])
  })

  it.live("every generated path, replayed against two instances on Redis", () =>
    Effect.gen(function*() {
      const checked = yield* replayAll(paths, input)
      assert.isAbove(checked, paths.length)
    }), 240_000)
})

/** The priority rule (machines/queue.ts): interactive first, batch at most capacity − 1 slots. */
const priorityInput = { capacity: 2, failureThreshold: 2 }
const priorityEvents = queueEvents({ waiters: 3, keys: ["a"], capacities: [2], priorities: ["interactive", "batch"] })
const priorityPaths = new TestModel(queueLogic, {
  events: (snapshot) => priorityEvents(snapshot.context).filter((e) => e.type !== "CIRCUIT_PROBE_DUE"),
  serializeState: (snapshot) => serializeQueue(snapshot.context),
  serializeTransition: () => "",
  input: priorityInput
}).getShortestPaths()

describe.skipIf(redisUrl === null)("Redis CapacityQueues follow the queue model's priority classes", () => {
  it("the generated paths have batch work held while interactive requests wait", () => {
    assert.isAbove(priorityPaths.length, 20)
    const states = priorityPaths.flatMap((path) => path.steps.map((step) => step.state.context as QueueState))
    assert.isTrue(states.some((state) => queueContents(state.context).batchHolders.length > 0 && queueContents(state.context).lanes.length > 0))
    assert.isTrue(states.some((state) => queueContents(state.context).batchLanes.length > 0 && queueContents(state.context).holders.length < state.context.capacity))
  })

  it.live("every generated path, replayed against two instances on Redis", () =>
    Effect.gen(function*() {
      const checked = yield* replayAll(priorityPaths, priorityInput)
      assert.isAbove(checked, priorityPaths.length)
    }), 240_000)
})
