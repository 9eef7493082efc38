/**
 * Preloaded into a process under test (`node --import bench/lib/loop-probe.ts …`): watches its
 * main thread's event-loop delay and, on SIGUSR2, reports the distribution since the previous
 * signal (JSON, microseconds) and starts a new window — to the file `BENCH_PROBE_FILE` when set,
 * else as one `loop-probe {…}` line on stderr (what lib/procs.ts reads). Bench-only: the gateway
 * itself knows nothing of it.
 */
import { writeFileSync } from "node:fs"
import { constants, monitorEventLoopDelay, PerformanceObserver } from "node:perf_hooks"
import { isMainThread } from "node:worker_threads"

const file = process.env.BENCH_PROBE_FILE
// `--import` also runs in every worker thread: watch the main thread only (a 1 ms timer in a
// worker would wake it a thousand times a second and be charged to the process under test).
if (isMainThread) {
// A 10 ms timer: 100 samples a second, each the delay of a timer that should have fired (a stall
// of a few milliseconds shows in it). A 1 ms timer would cost the server under test ~25 ms of
// CPU a second, which the bench would then charge to it.
const histogram = monitorEventLoopDelay({ resolution: 10 })
histogram.enable()
// GC pauses on the main thread, by kind (minor = scavenge), since the previous report: a loop
// delay of a few ms is often one of these.
type Pauses = { count: number; totalMs: number; maxMs: number; over2ms: number }
let gc: Record<string, Pauses> = {}
const KINDS: Record<number, string> = {
  [constants.NODE_PERFORMANCE_GC_MINOR]: "minor",
  [constants.NODE_PERFORMANCE_GC_MAJOR]: "major",
  [constants.NODE_PERFORMANCE_GC_INCREMENTAL]: "incremental",
  [constants.NODE_PERFORMANCE_GC_WEAKCB]: "weakcb"
}
new PerformanceObserver((list) => {
  for (const entry of list.getEntries()) {
    const kind = KINDS[(entry as unknown as { detail?: { kind: number } }).detail?.kind ?? -1] ?? "other"
    const pauses = (gc[kind] ??= { count: 0, totalMs: 0, maxMs: 0, over2ms: 0 })
    pauses.count++
    pauses.totalMs = Math.round((pauses.totalMs + entry.duration) * 100) / 100
    pauses.maxMs = Math.max(pauses.maxMs, Math.round(entry.duration * 100) / 100)
    if (entry.duration > 2) pauses.over2ms++
  }
}).observe({ entryTypes: ["gc"] })
// Optional (`BENCH_PROBE_CPU_MS`, e.g. 2): the most main-thread CPU time spent between two ticks of
// a timer of that period — the longest stretch of work the loop ran without a break, which a busy
// machine cannot inflate (time the process waited for a core is not CPU time), unlike the delay.
const cpuPeriodMs = Number(process.env.BENCH_PROBE_CPU_MS ?? 0)
let cpuMax = 0
let cpuMaxAt = 0
if (cpuPeriodMs > 0) {
  const cpuNow = () => {
    const usage = process.threadCpuUsage()
    return usage.user + usage.system
  }
  let last = cpuNow()
  const tick = () => {
    const now = cpuNow()
    if (now - last > cpuMax) { cpuMax = now - last; cpuMaxAt = Number(process.hrtime.bigint() / 1000n) }
    last = now
    setTimeout(tick, cpuPeriodMs).unref()
  }
  setTimeout(tick, cpuPeriodMs).unref()
}
process.on("SIGUSR2", () => {
  // Each sample is the timer's whole interval: less its 10 ms period, it is the delay.
  const us = (ns: number) => Math.max(0, ns / 1000 - 10_000)
  const report = JSON.stringify({
    count: histogram.count,
    p50: us(histogram.percentile(50)),
    p99: us(histogram.percentile(99)),
    p999: us(histogram.percentile(99.9)),
    max: us(histogram.max),
    mean: us(histogram.mean),
    gc,
    ...(cpuPeriodMs > 0 ? { cpuMax, cpuMaxAt } : {})
  })
  histogram.reset()
  gc = {}
  cpuMax = 0
  if (file !== undefined && file !== "") writeFileSync(file, report)
  else process.stderr.write(`loop-probe ${report}\n`)
})
}
