/**
 * Loaded into a server under test with `node --import ./bench/lib/loop-probe.ts …`: samples the
 * event-loop delay (perf_hooks.monitorEventLoopDelay, 1 ms resolution) and, on SIGUSR2, prints
 * `loop-probe {json}` with the percentiles (µs) since the previous report and resets. The bench
 * reads the line from the process's output. Nothing of the server changes.
 */
import { monitorEventLoopDelay } from "node:perf_hooks"

const histogram = monitorEventLoopDelay({ resolution: 1 })
histogram.enable()
process.on("SIGUSR2", () => {
  const us = (ns: number) => Math.round(ns / 1000)
  const report = {
    count: histogram.count,
    p50Us: us(histogram.percentile(50)),
    p99Us: us(histogram.percentile(99)),
    maxUs: us(histogram.max),
    meanUs: us(histogram.mean)
  }
  histogram.reset()
  process.stderr.write(`loop-probe ${JSON.stringify(report)}\n`)
})
