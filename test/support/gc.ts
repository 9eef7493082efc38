/**
 * V8's `gc()` in this test's own process (vitest's workers run without `--expose-gc`): the flag is
 * set at run time and the function taken from a new context, where V8 installs it. For tests about
 * what is still referenced, or freed, after a full collection.
 */
import { setFlagsFromString } from "node:v8"
import { runInNewContext } from "node:vm"

export const exposedGc = (): (() => void) => {
  setFlagsFromString("--expose-gc")
  return runInNewContext("gc") as () => void
}

/**
 * Whether `ref`'s target is collected within a few turns of the event loop: each turn lets the
 * worker's other work run (a scheduler's queue, a timer of another file sharing the worker: what a
 * finished fiber left in them lets go once they run), then collects twice. What the code under test
 * itself keeps stays alive on every turn, so the answer is false and the test fails. One turn
 * (`setImmediate` then two collections) was not always enough: a clean clone's full run once found
 * the target alive where five runs of the file alone never did (2026-12-01).
 */
export const collectedWithin = async (ref: WeakRef<object>, turns = 20): Promise<boolean> => {
  const gc = exposedGc()
  for (let turn = 0; turn < turns; turn++) {
    await new Promise((resolve) => setTimeout(resolve, turn === 0 ? 0 : 10))
    gc()
    gc()
    if (ref.deref() === undefined) return true
  }
  return false
}
