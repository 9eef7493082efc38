/**
 * Preloaded into a process under test (`node --import bench/lib/loop-probe.ts …`): watches its
 * main thread's event-loop delay and, on SIGUSR2, writes the distribution since the previous
 * signal to `BENCH_PROBE_FILE` (JSON, microseconds) and starts a new window. Bench-only: the
 * gateway itself knows nothing of it.
 */
import { writeFileSync } from "node:fs"
import { monitorEventLoopDelay } from "node:perf_hooks"

const file = process.env.BENCH_PROBE_FILE
if (file !== undefined && file !== "") {
  // 1 ms timer: a stall of a few milliseconds shows up as its own sample.
  const histogram = monitorEventLoopDelay({ resolution: 1 })
  histogram.enable()
  process.on("SIGUSR2", () => {
    const us = (ns: number) => ns / 1000
    writeFileSync(file, JSON.stringify({
      count: histogram.count,
      p50: us(histogram.percentile(50)),
      p99: us(histogram.percentile(99)),
      p999: us(histogram.percentile(99.9)),
      max: us(histogram.max),
      mean: us(histogram.mean)
    }))
    histogram.reset()
  })
}
