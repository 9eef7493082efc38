/**
 * `coalescedRuns` (src/util/coalesced-runs.ts): asks while a run goes on give one more run after
 * it, not one each; an ask while nothing runs starts one; a failed run does not stop the next.
 */
import { Deferred, Effect, Exit, Scope } from "effect"
import { describe, expect, it } from "vitest"
import { coalescedRuns } from "../../src/util/coalesced-runs.ts"

/** A run that waits for its gate, counting how many started. */
const gatedRuns = Effect.gen(function*() {
  const gates: Array<Deferred.Deferred<void>> = []
  const started = { count: 0 }
  const effect = Effect.suspend(() => {
    started.count++
    const gate = Deferred.makeUnsafe<void>()
    gates.push(gate)
    return Deferred.await(gate)
  })
  const open = (i: number) => Deferred.succeed(gates[i]!, undefined)
  return { effect, started, open, gates }
})

describe("coalescedRuns", () => {
  it("folds the asks made while a run goes on into one run after it", async () => {
    await Effect.runPromise(Effect.gen(function*() {
      const scope = yield* Scope.make()
      const { effect, started, open } = yield* gatedRuns
      const runs = coalescedRuns(effect, scope)
      yield* runs.ask
      yield* Effect.yieldNow
      expect(started.count).toBe(1)
      // A thousand requests end while the first run is on: one more run, not a thousand.
      for (let i = 0; i < 1000; i++) yield* runs.ask
      yield* open(0)
      yield* Effect.yieldNow
      yield* Effect.yieldNow
      expect(started.count).toBe(2)
      yield* open(1)
      yield* Effect.yieldNow
      expect(started.count).toBe(2)
      // Nothing runs now: the next ask starts a run at once.
      yield* runs.ask
      yield* Effect.yieldNow
      expect(started.count).toBe(3)
      yield* open(2)
      yield* Scope.close(scope, Exit.void)
    }))
  })

  it("runs again after a run that failed or died", async () => {
    await Effect.runPromise(Effect.gen(function*() {
      const scope = yield* Scope.make()
      let count = 0
      const done = Deferred.makeUnsafe<void>()
      const effect = Effect.suspend(() => {
        count++
        if (count === 1) return Effect.die("a bug")
        return Deferred.succeed(done, undefined)
      }) as Effect.Effect<void>
      const runs = coalescedRuns(effect, scope)
      yield* runs.ask
      yield* Effect.yieldNow
      yield* runs.ask
      yield* Deferred.await(done)
      expect(count).toBe(2)
      yield* Scope.close(scope, Exit.void)
    }))
  })
})
