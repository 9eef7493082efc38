/**
 * Drives the real CapacityQueues service along the paths `xstate/graph` generates from the pure
 * queue machine, and checks after every step that the hosted queue shows exactly the model's
 * state: slots, waiters per key, circuit, and which requests hold a lease (`queue-replay.ts`; the
 * Redis queues are replayed through the same steps in `redis-queues-model.test.ts`).
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { TestClock } from "effect/testing"
import { CapacityQueues } from "../../src/runtime/capacity-queues.ts"
import { queuePaths, replayPath, type QueuePath } from "../support/queue-replay.ts"

const cooldownMs = 30_000
const input = { capacity: 1, failureThreshold: 2 }
const paths = queuePaths(input, { waiters: 3, keys: ["a", "b"], capacities: [1, 2] })

/** Everything is in process: a step has landed once the fibers it woke have run. */
const settle = Effect.yieldNow.pipe(Effect.repeat({ times: 10 }))

const replay = (path: QueuePath) =>
  Effect.gen(function*() {
    const queues = yield* CapacityQueues
    return yield* replayPath({
      instances: [queues],
      cooldown: TestClock.adjust(cooldownMs),
      awaitState: (read) => Effect.andThen(settle, read)
    }, path)
  }).pipe(Effect.provide(CapacityQueues.layerTest({ placements: [{ placementId: "p1", ...input }], ...input, probeCooldownMs: cooldownMs })))

describe("CapacityQueues follows the queue model", () => {
  it("the generated paths cover the circuit and the fairness ring", () => {
    assert.isAbove(paths.length, 50)
    const values = new Set(paths.map((path) => path.state.value as string))
    assert.sameMembers([...values], ["closed", "open", "halfOpen"])
  })

  it.effect("every generated path, replayed against the hosted queues", () =>
    Effect.gen(function*() {
      let checked = 0
      for (const path of paths) checked += yield* replay(path)
      assert.isAbove(checked, paths.length)
    }))
})
