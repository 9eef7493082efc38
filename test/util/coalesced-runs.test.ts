/**
 * `coalescedRuns` (src/util/coalesced-runs.ts): asks while a run goes on give one more run after
 * it, not one each; an ask while nothing runs starts one; a failed run does not stop the next;
 * `fresh` answers with a run that started after the call.
 */
import { Deferred, Effect, Exit, Fiber, Scope } from "effect"
import { describe, expect, it } from "vitest"
import { coalescedRuns } from "../../src/util/coalesced-runs.ts"

/** A run that waits for its gate, counting how many started; its answer is its number (1, 2 …). */
const gatedRuns = Effect.gen(function*() {
  const gates: Array<Deferred.Deferred<void>> = []
  const started = { count: 0 }
  const effect = Effect.suspend(() => {
    const number = ++started.count
    const gate = Deferred.makeUnsafe<void>()
    gates.push(gate)
    return Effect.as(Deferred.await(gate), number)
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

  it("fresh: callers during a run share the next run's answer, never the one already running", async () => {
    await Effect.runPromise(Effect.gen(function*() {
      const scope = yield* Scope.make()
      const { effect, started, open } = yield* gatedRuns
      const runs = coalescedRuns(effect, scope)
      const first = yield* Effect.forkChild(runs.fresh)
      while (started.count === 0) yield* Effect.yieldNow
      // A hundred callers while run 1 is on: none may take run 1's answer (it began before them).
      const later = yield* Effect.forEach(Array.from({ length: 100 }), () => Effect.forkChild(runs.fresh))
      yield* open(0)
      expect(yield* Fiber.join(first)).toBe(1)
      while (started.count === 1) yield* Effect.yieldNow
      yield* open(1)
      expect(new Set(yield* Fiber.joinAll(later))).toEqual(new Set([2]))
      expect(started.count).toBe(2)
      yield* Scope.close(scope, Exit.void)
    }))
  })

  it("fresh: a failed run fails its callers, and the next caller gets a run of its own", async () => {
    await Effect.runPromise(Effect.gen(function*() {
      const scope = yield* Scope.make()
      let count = 0
      const effect = Effect.suspend(() => ++count === 1 ? Effect.fail("store down" as const) : Effect.succeed(count))
      const runs = coalescedRuns(effect, scope)
      expect(yield* Effect.flip(runs.fresh)).toBe("store down")
      expect(yield* runs.fresh).toBe(2)
      yield* Scope.close(scope, Exit.void)
    }))
  })

  it("fresh: callers waiting when the scope closes are interrupted, not left hanging", async () => {
    const exit = await Effect.runPromise(Effect.gen(function*() {
      const scope = yield* Scope.make()
      const runs = coalescedRuns(Effect.never, scope)
      const caller = yield* Effect.forkChild(runs.fresh)
      yield* Effect.yieldNow
      yield* Scope.close(scope, Exit.void)
      return yield* Fiber.await(caller)
    }))
    expect(Exit.hasInterrupts(exit)).toBe(true)
  })
})
