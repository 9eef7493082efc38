/**
 * Preloaded into a gateway under test together with `--expose-gc` (`node --expose-gc --import
 * bench/lib/heap-probe.ts …`): on SIGUSR2 it collects garbage (twice: weak callbacks free more on
 * the second pass) and reports the main thread's memory as one `heap-probe {…}` line on stderr
 * (MiB); with `BENCH_HEAP_SNAPSHOT_DIR` set it also writes a heap snapshot there, for
 * comparing retained objects by constructor. Bench-only, like loop-probe.ts.
 */
import { getHeapSpaceStatistics, writeHeapSnapshot } from "node:v8"
import { isMainThread } from "node:worker_threads"

if (isMainThread) {
  process.on("SIGUSR2", () => {
    const gc = (globalThis as { gc?: () => void }).gc
    gc?.()
    gc?.()
    const m = process.memoryUsage()
    const mib = (bytes: number) => Math.round((bytes / 1048576) * 100) / 100
    const newSpace = getHeapSpaceStatistics().find((s) => s.space_name === "new_space")
    const report = {
      collected: gc !== undefined,
      rss: mib(m.rss),
      heapUsed: mib(m.heapUsed),
      heapTotal: mib(m.heapTotal),
      external: mib(m.external),
      arrayBuffers: mib(m.arrayBuffers),
      newSpaceCommitted: mib(newSpace?.physical_space_size ?? 0)
    }
    const dir = process.env.BENCH_HEAP_SNAPSHOT_DIR
    const snapshot = dir === undefined || dir === "" ? undefined : writeHeapSnapshot(`${dir}/heap-${Date.now()}.heapsnapshot`)
    process.stderr.write(`heap-probe ${JSON.stringify({ ...report, snapshot })}\n`)
  })
}
