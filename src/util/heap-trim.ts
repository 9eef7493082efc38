/**
 * Gives the main thread's memory back whenever the server falls quiet, after start-up or after traffic.
 *
 * V8 grows its young generation under allocation (start-up's ~60 MB of module loading, a burst of
 * requests) and keeps it grown: on this machine a gateway listens with ~40 MB of new space
 * committed for ~0.5 MB live, and after a burst the RSS stays where the burst left it. V8 has a
 * memory reducer for exactly this, but in a server it never fires: it judges idleness from the
 * allocation rate sampled at garbage collections, and an idle process makes none, so it keeps
 * reading the last busy rate (`--trace-memory-reducer` prints "high alloc" every 8 s, forever).
 *
 * What the reducer would run is a memory-reducing full collection: it compacts the old generation
 * and shrinks the new space back to its minimum (measured on the embedded engine: an idle gateway
 * 241 → 188 MiB RSS, one after a burst of 2,000 requests 276 → 246; 50–130 ms on the main thread).
 * Node has no call for it, so `gc` is reached the way Jest's leak detector reaches it: with
 * `--expose-gc` set for a moment, a new context's global has `gc` (the flag is unset again, so no
 * other context gets one).
 *
 * When: once the server has been quiet for `quietMs` (default a minute) after start-up or after
 * requests — no request started, none in flight (an open stream never sees the pause), and the
 * event loop under 5% busy all along (background work such as agent runs or batches is left
 * alone) — or after the heap grew by 16 MiB without requests. One trim per quiet stretch: a server
 * that stays idle is not collected again and again.
 *
 * Before the collection, `alsoWhenQuiet` runs: what else can give memory back (the gateway stops
 * an idle tokenizer thread, `model/tokenizer.ts`); it returns a note for the log line, or nothing.
 *
 * Why not at once after start-up, and why only after a long quiet: the trim also leaves V8 a small
 * young generation and a tight old-generation limit, which it grows back under load over ~30–40 s
 * of more frequent collections (measured at 200 req/s right after a trim: 52 scavenges and 7 full
 * collections in the first 10 s against 18 and 2, then 3–4 scavenges per 10 s in both, with a
 * full collection every ~10 s that the untrimmed process did not have; p99 19 ms against 7 over
 * the minute). A server that was just started or is under steady traffic keeps what it has; one
 * that sat idle for a minute gives its memory back and pays that once when traffic returns.
 */
import { Effect } from "effect"
import { performance } from "node:perf_hooks"
import { getHeapStatistics, setFlagsFromString } from "node:v8"
import { runInNewContext } from "node:vm"

type Collect = (options: { readonly type: "major"; readonly execution: "sync"; readonly flavor: "last-resort" }) => void

let collect: Collect | undefined

const collector = (): Collect => {
  if (collect !== undefined) return collect
  const exposed = (globalThis as { gc?: unknown }).gc
  if (typeof exposed === "function") {
    collect = exposed as Collect
  } else {
    setFlagsFromString("--expose-gc")
    collect = runInNewContext("gc") as Collect
    setFlagsFromString("--no-expose-gc")
  }
  return collect
}

const MiB = 1024 * 1024

/** What a trim did: the main thread's heap and the process's RSS before and after, and how long it took. */
interface HeapTrim {
  readonly ms: number
  readonly heapMiB: readonly [before: number, after: number]
  readonly rssMiB: readonly [before: number, after: number]
}

/** One memory-reducing full collection of this thread's heap, now. */
const trimHeap = (): HeapTrim => {
  const heapBefore = getHeapStatistics().total_physical_size
  const rssBefore = process.memoryUsage.rss()
  const started = performance.now()
  collector()({ type: "major", execution: "sync", flavor: "last-resort" })
  const ms = performance.now() - started
  const round = (bytes: number) => Math.round(bytes / MiB)
  return {
    ms: Math.round(ms * 10) / 10,
    heapMiB: [round(heapBefore), round(getHeapStatistics().total_physical_size)],
    rssMiB: [round(rssBefore), round(process.memoryUsage.rss())]
  }
}

/** The listener's counts, kept by the Node server: requests started since start, and those not yet answered. */
export interface ServerActivity {
  started: number
  open: number
}

/** Growth of the heap without requests (background work) that also earns a trim. */
const QUIET_GROWTH_BYTES = 16 * MiB
/** Busiest the event loop may be over a quiet stretch for it to count as quiet. */
const QUIET_UTILIZATION = 0.05

/** The line logged for a trim. */
const describeTrim = (quietMs: number, trim: HeapTrim, also: string | undefined) =>
  `memory trimmed after ${quietMs} ms quiet: heap ${trim.heapMiB[0]} → ${trim.heapMiB[1]} MiB, RSS ${trim.rssMiB[0]} → ${trim.rssMiB[1]} MiB in ${trim.ms} ms${also === undefined ? "" : `; ${also}`}`

/**
 * Runs forever (fork it): trims the heap once the server has been quiet for `quietMs` after
 * activity (start-up counts as activity), as the module's comment says. Looks every quarter of
 * `quietMs`, so a trim comes between `quietMs` and 1.25 × `quietMs` after the last request.
 */
export const trimWhenQuiet = Effect.fnUntraced(function*(activity: ServerActivity, quietMs: number, alsoWhenQuiet?: () => string | undefined) {
  const lookMs = Math.max(1, Math.floor(quietMs / 4))
  let seen = activity.started
  let quietForMs = 0
  let due = true
  let floor = getHeapStatistics().total_physical_size
  let loop = performance.eventLoopUtilization()
  for (;;) {
    yield* Effect.sleep(lookMs)
    const now = performance.eventLoopUtilization()
    const utilization = performance.eventLoopUtilization(now, loop).utilization
    loop = now
    const served = activity.started !== seen
    if (served) {
      seen = activity.started
      due = true
    }
    if (served || activity.open > 0 || utilization > QUIET_UTILIZATION) {
      quietForMs = 0
      continue
    }
    quietForMs += lookMs
    if (quietForMs < quietMs) continue
    if (!due && getHeapStatistics().total_physical_size <= floor + QUIET_GROWTH_BYTES) continue
    const also = alsoWhenQuiet?.()
    const trim = trimHeap()
    due = false
    quietForMs = 0
    floor = getHeapStatistics().total_physical_size
    yield* Effect.logInfo(describeTrim(quietMs, trim, also))
  }
})
