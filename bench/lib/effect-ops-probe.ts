/**
 * Preloaded into a gateway under `bench/effect-ops.ts` (`node --import bench/lib/effect-ops-probe.ts
 * …`): counts the Effect runtime's work — operations evaluated (run-loop steps), fibers started and
 * fiber resumptions (each `evaluate`: a start or a wake-up after an async step) — and writes the
 * totals so far to `BENCH_EFFECT_OPS_FILE` on SIGUSR2. The counts are the same on any machine, so
 * a change to the request path shows in them however noisy the CPU clock is. Bench-only: the
 * gateway knows nothing of it.
 *
 * It wraps two methods of Effect's fiber class, imported by file URL from the gateway's own copy
 * of `effect` (the same module instance the gateway loads, so the wrappers see its fibers).
 */
import { writeFileSync } from "node:fs"
import { join } from "node:path"
import { pathToFileURL } from "node:url"
import { isMainThread } from "node:worker_threads"

interface Fiber {
  readonly id: number
  readonly currentOpCount: number
  runLoop(effect: unknown): unknown
  evaluate(effect: unknown): unknown
}

const file = process.env.BENCH_EFFECT_OPS_FILE
if (isMainThread && file !== undefined) {
  const internal = pathToFileURL(join(import.meta.dirname, "..", "..", "node_modules", "effect", "dist", "internal", "effect.js")).href
  const { FiberImpl } = (await import(internal)) as { FiberImpl: { prototype: Fiber } }
  const counts = { ops: 0, resumptions: 0, fibers: 0 }
  let highestFiberId = 0
  const runLoop = FiberImpl.prototype.runLoop
  FiberImpl.prototype.runLoop = function (this: Fiber, effect: unknown) {
    try {
      return runLoop.call(this, effect)
    } finally {
      // The loop resets `currentOpCount` when it starts and counts each step it takes.
      counts.ops += this.currentOpCount
    }
  }
  const evaluate = FiberImpl.prototype.evaluate
  FiberImpl.prototype.evaluate = function (this: Fiber & { readonly _asyncContext?: unknown }, effect: unknown) {
    // With an async context to restore, `evaluate` calls itself once inside it: count that call.
    if (this._asyncContext === undefined) counts.resumptions++
    // Fiber ids are handed out in order: a higher one than any seen is a fiber new since.
    if (this.id > highestFiberId) {
      counts.fibers += this.id - highestFiberId
      highestFiberId = this.id
    }
    return evaluate.call(this, effect)
  }
  process.on("SIGUSR2", () => writeFileSync(file, JSON.stringify(counts)))
}
