/**
 * `acquireReleasePlain` (src/util/scoped.ts): the release runs once, when the scope closes, with
 * the resource; and while the scope stays open, the finalizer holds only the release and the
 * resource — not the acquiring effect, whose closures hold what it was made from (an upstream
 * call's whole request body, for as long as a streamed answer lasts).
 */
import { Effect, Exit, Scope } from "effect"
import { setFlagsFromString } from "node:v8"
import { runInNewContext } from "node:vm"
import { describe, expect, it } from "vitest"
import { acquireReleasePlain } from "../../src/util/scoped.ts"

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
    setFlagsFromString("--expose-gc")
    const gc = runInNewContext("gc") as () => void
    const scope = Scope.makeUnsafe()
    const acquiredFrom = (() => {
      // What an acquire closes over: a request body, say.
      const body = { text: "x".repeat(1024) }
      const ref = new WeakRef(body)
      const acquire = Effect.sync(() => body.text.length)
      return { ref, run: Effect.runPromise(Scope.provide(acquireReleasePlain(acquire, noRelease), scope)) }
    })()
    expect(await acquiredFrom.run).toBe(1024)
    await new Promise((resolve) => setImmediate(resolve))
    gc()
    gc()
    expect(acquiredFrom.ref.deref()).toBeUndefined()
    await Effect.runPromise(Scope.close(scope, Exit.void))
  })
})
