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
