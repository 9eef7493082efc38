/**
 * `acquireReleasePlain` (src/util/scoped.ts): the release runs once, when the scope closes, with
 * the resource; and while the scope stays open, the finalizer holds only the release and the
 * resource — not the acquiring effect, whose closures hold what it was made from (an upstream
 * call's whole request body, for as long as a streamed answer lasts). `unwrapPlain`: the stream
 * opens at its first pull and reads as `Stream.unwrap` does, an opening that failed is tried again,
 * and once open the pull no longer holds the opening effect (Effect's `unwrap` does, for as long as
 * the stream is pulled).
 */
import { Effect, Exit, Pull, Scope, Stream } from "effect"
import { describe, expect, it } from "vitest"
import { acquireReleasePlain, toPullPlain, unwrapPlain } from "../../src/util/scoped.ts"
import { collectedWithin } from "../support/gc.ts"

/** Made out here: a release written beside the acquire would share its closures' scope (and hold the body itself). */
const noRelease = () => Effect.void

describe("acquireReleasePlain", () => {
  it("releases the resource once, when the scope closes", async () => {
    const released: Array<string> = []
    const scope = Scope.makeUnsafe()
    const resource = await Effect.runPromise(Scope.provide(acquireReleasePlain(Effect.succeed("socket"), (r) => Effect.sync(() => released.push(r))), scope))
    expect(resource).toBe("socket")
    expect(released).toEqual([])
    await Effect.runPromise(Scope.close(scope, Exit.void))
    expect(released).toEqual(["socket"])
  })

  it("does not keep what the acquiring effect captured while the scope is open", async () => {
    const scope = Scope.makeUnsafe()
    const acquiredFrom = (() => {
      // What an acquire closes over: a request body, say.
      const body = { text: "x".repeat(1024) }
      const ref = new WeakRef(body)
      const acquire = Effect.sync(() => body.text.length)
      return { ref, run: Effect.runPromise(Scope.provide(acquireReleasePlain(acquire, noRelease), scope)) }
    })()
    expect(await acquiredFrom.run).toBe(1024)
    // The scope stays open until after the check: what its finalizer holds is still held.
    expect(await collectedWithin(acquiredFrom.ref)).toBe(true)
    await Effect.runPromise(Scope.close(scope, Exit.void))
  })
})

describe("unwrapPlain", () => {
  it("opens at the first pull, in the stream's scope, and reads the stream it opened", async () => {
    let opened = 0
    const finalized: Array<string> = []
    const open = Effect.gen(function*() {
      opened++
      yield* Effect.addFinalizer(() => Effect.sync(() => finalized.push("opened stream")))
      return Stream.fromArray([1, 2, 3])
    })
    const stream = unwrapPlain(open)
    expect(opened).toBe(0)
    expect(await Effect.runPromise(Stream.runCollect(stream))).toEqual([1, 2, 3])
    expect(opened).toBe(1)
    expect(finalized).toEqual(["opened stream"])
    // A stream value runs again, opening again.
    expect(await Effect.runPromise(Stream.runCollect(stream))).toEqual([1, 2, 3])
    expect(opened).toBe(2)
  })

  it("fails with the opening's failure, and a later pull tries the opening again", async () => {
    let attempts = 0
    const open = Effect.suspend(() => (++attempts === 1 ? Effect.fail("refused") : Effect.succeed(Stream.fromArray(["a"]))))
    const scope = Scope.makeUnsafe()
    const pull = await Effect.runPromise(Scope.provide(toPullPlain(unwrapPlain(open)), scope))
    expect(await Effect.runPromise(Effect.flip(pull))).toBe("refused")
    expect(await Effect.runPromise(pull)).toEqual(["a"])
    const end = await Effect.runPromise(Effect.exit(pull))
    expect(Exit.isFailure(end) && Pull.isDoneCause(end.cause)).toBe(true)
    await Effect.runPromise(Scope.close(scope, Exit.void))
  })

  it("does not keep the opening effect's captures once the stream is open", async () => {
    const scope = Scope.makeUnsafe()
    const opened = (() => {
      // What an opening closes over: a wire body, say.
      const body = { text: "x".repeat(1024) }
      const ref = new WeakRef(body)
      const open = Effect.sync(() => Stream.fromArray([body.text.length, 0]))
      return { ref, pull: Effect.runPromise(Scope.provide(toPullPlain(unwrapPlain(open)), scope)) }
    })()
    const pull = await opened.pull
    expect(await Effect.runPromise(pull)).toEqual([1024, 0])
    // The stream is still open (its pull is held here) but its opening is gone.
    expect(await collectedWithin(opened.ref)).toBe(true)
    await Effect.runPromise(Scope.close(scope, Exit.void))
  })
})
