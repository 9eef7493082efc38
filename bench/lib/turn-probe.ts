/**
 * Preloaded into a process under test (`node --import bench/lib/turn-probe.ts --cpu-prof …`): times
 * every turn of its main thread's event loop (each top-level callback: an immediate, a timer, a
 * socket read, a worker's message) with `async_hooks`, and keeps those over `BENCH_TURN_MIN_MS`
 * (default 10) with their start, in `process.hrtime` microseconds. At start it runs a 30 ms busy
 * loop in a function named `__turnProbeMarker`, so `bench/long-turns.ts` can align these times with
 * a `--cpu-prof` profile's own clock and show what ran inside each long turn — which a profile
 * alone cannot tell: work sliced across many turns and work held in one look alike there (the
 * loop's short polls between slices are rarely sampled as idle).
 *
 * The hooks cost CPU on every callback (promises included): use it to find long turns, not to
 * measure them (`lib/loop-probe.ts` measures). Writes `BENCH_TURNS_FILE` (default
 * `$TMPDIR/turn-probe.json`) every half second. Bench-only: the gateway knows nothing of it.
 */
import { createHook } from "node:async_hooks"
import { writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { isMainThread } from "node:worker_threads"

/** What the probe writes: the marker's start and the long turns, each `{ type, start, ms }`. */
export interface TurnProbeReport {
  readonly markerAt: number
  readonly long: ReadonlyArray<{ readonly type: string; readonly start: number; readonly ms: number }>
}

export const TURNS_FILE = process.env.BENCH_TURNS_FILE ?? join(tmpdir(), "turn-probe.json")

if (isMainThread) {
  const minUs = Number(process.env.BENCH_TURN_MIN_MS ?? 10) * 1000
  const now = () => Number(process.hrtime.bigint() / 1000n)
  const __turnProbeMarker = () => {
    const end = performance.now() + 30
    let spins = 0
    while (performance.now() < end) spins++
    return spins
  }
  const markerAt = now()
  __turnProbeMarker()
  const long: Array<{ type: string; start: number; ms: number }> = []
  const types = new Map<number, string>()
  let depth = 0
  let start = 0
  let type = ""
  createHook({
    init: (id, kind) => void types.set(id, kind),
    before: (id) => {
      if (depth++ === 0) {
        start = now()
        type = types.get(id) ?? "?"
      }
    },
    after: () => {
      if (--depth !== 0) return
      const us = now() - start
      if (us >= minUs) long.push({ type, start, ms: us / 1000 })
      if (long.length > 500) long.splice(0, long.length - 500)
    },
    destroy: (id) => void types.delete(id)
  }).enable()
  setInterval(() => writeFileSync(TURNS_FILE, JSON.stringify({ markerAt, long } satisfies TurnProbeReport)), 500).unref()
}
