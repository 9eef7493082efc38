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
import { Effect } from "effect"
import { inject } from "vitest"
import { queueContents, type QueueState } from "../../machines/queue.ts"
import { makeRedisCapacityQueues } from "../../src/runtime/redis-capacity-queues.ts"
import { dropPrefix, uniquePrefix } from "../coordination/support.ts"
import { type QueuePath, queuePaths, replayPath } from "../support/queue-replay.ts"

const { redisUrl } = inject("services")
const url = redisUrl ?? ""

// An open circuit turns half-open by itself after the cooldown, so a step that ends "open" must be
// seen within it: 150 ms was missed on a loaded machine. Paths replay at once (below), so the
// 20 cooldown steps that wait it out cost little.
const cooldownMs = 1_000
const input = { capacity: 1, failureThreshold: 2 }
const paths = queuePaths(input, { waiters: 3, keys: ["a", "b"], capacities: [1, 2] })

/** Reads until `done` holds (grants travel over pub/sub), at most ~3 s; answers the last reading. */
const poll = <A>(read: Effect.Effect<A>, done: (value: A) => boolean) =>
  Effect.gen(function*() {
    let last = yield* read
    for (let i = 0; i < 150 && !done(last); i++) {
      yield* Effect.sleep(20)
      last = yield* read
    }
    return last
  })

/** Replays one path on two instances (waiters alternate between them); returns the steps checked. */
const replay = (path: QueuePath, start = input) =>
  Effect.scoped(Effect.gen(function*() {
    const prefix = uniquePrefix()
    yield* Effect.addFinalizer(() => dropPrefix(url, prefix))
    const options = { placements: [{ placementId: "p1", capacity: start.capacity }], ...start, probeCooldownMs: cooldownMs, pollIntervalMs: 50, prefix }
    const instances = [yield* makeRedisCapacityQueues(url, options), yield* makeRedisCapacityQueues(url, options)]
    // The cooldown passes in real time: the polling after the step waits until the hosted view
    // shows the model's state after it (half-open, or the probe granted).
    return yield* replayPath({ instances, cooldown: Effect.void, awaitState: poll }, path)
  }))

/**
 * Replays every path; returns the steps checked. Paths are independent (each has its own prefix
 * and instances) and a replay mostly waits on Redis round trips and pub/sub, so a few run at once.
 */
const replayAll = (all: ReadonlyArray<QueuePath>, start: typeof input) =>
  Effect.forEach(all, (path) => replay(path, start), { concurrency: 4 }).pipe(
    Effect.map((counts) => counts.reduce((sum, n) => sum + n, 0))
  )

describe.skipIf(redisUrl === null)("Redis CapacityQueues follow the queue model", () => {
  it("the generated paths cover the circuit and the fairness ring", () => {
    assert.isAbove(paths.length, 50)
    assert.sameMembers([...new Set(paths.map((path) => path.state.value as string))], ["closed", "open", "halfOpen"])
  })

  it.live("every generated path, replayed against two instances on Redis", () =>
    Effect.gen(function*() {
      const checked = yield* replayAll(paths, input)
      assert.isAbove(checked, paths.length)
    }), 240_000)
})

/** The priority rule (machines/queue.ts): interactive first, batch at most capacity − 1 slots. */
const priorityInput = { capacity: 2, failureThreshold: 2 }
const priorityPaths = queuePaths(
  priorityInput,
  { waiters: 3, keys: ["a"], capacities: [2], priorities: ["interactive", "batch"] },
  (event) => event.type !== "CIRCUIT_PROBE_DUE"
)

describe.skipIf(redisUrl === null)("Redis CapacityQueues follow the queue model's priority classes", () => {
  it("the generated paths have batch work held while interactive requests wait", () => {
    assert.isAbove(priorityPaths.length, 20)
    const states: Array<QueueState> = priorityPaths.flatMap((path) => path.steps.map((step) => step.state))
    assert.isTrue(states.some((state) => queueContents(state.context).batchHolders.length > 0 && queueContents(state.context).lanes.length > 0))
    assert.isTrue(states.some((state) => queueContents(state.context).batchLanes.length > 0 && queueContents(state.context).holders.length < state.context.capacity))
  })

  it.live("every generated path, replayed against two instances on Redis", () =>
    Effect.gen(function*() {
      const checked = yield* replayAll(priorityPaths, priorityInput)
      assert.isAbove(checked, priorityPaths.length)
    }), 240_000)
})
