/**
 * Preloaded into a process under test (`node --import bench/lib/loop-probe.ts …`): watches its
 * main thread's event-loop delay and, on SIGUSR2, reports the distribution since the previous
 * signal (JSON, microseconds) and starts a new window — to the file `BENCH_PROBE_FILE` when set,
 * else as one `loop-probe {…}` line on stderr (what lib/procs.ts reads). Bench-only: the gateway
 * itself knows nothing of it.
 */
import { writeFileSync } from "node:fs"
import { monitorEventLoopDelay } from "node:perf_hooks"

const file = process.env.BENCH_PROBE_FILE
// 1 ms timer: a stall of a few milliseconds shows up as its own sample.
const histogram = monitorEventLoopDelay({ resolution: 1 })
histogram.enable()
process.on("SIGUSR2", () => {
  const us = (ns: number) => ns / 1000
  const report = JSON.stringify({
    count: histogram.count,
    p50: us(histogram.percentile(50)),
    p99: us(histogram.percentile(99)),
    p999: us(histogram.percentile(99.9)),
    max: us(histogram.max),
    mean: us(histogram.mean)
  })
  histogram.reset()
  if (file !== undefined && file !== "") writeFileSync(file, report)
  else process.stderr.write(`loop-probe ${report}\n`)
})
