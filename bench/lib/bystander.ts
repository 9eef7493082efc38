/**
 * Another client beside a heavy request: `GET /v1/models` in a loop in a worker thread of the
 * bench's own process (so building and reading megabyte bodies here never counts as the gateway's
 * delay), every `gapMs`. `collect` returns the slowest answer (a round trip, ~1 ms at best), how
 * many and how many failed since the last call.
 */
import { Worker } from "node:worker_threads"

const bystanderCode = `
const { parentPort, workerData } = require("node:worker_threads")
let worst = 0, count = 0, failures = 0, stop = false
parentPort.on("message", (m) => {
  if (m === "stop") { stop = true; return }
  parentPort.postMessage({ worst, count, failures }); worst = 0; count = 0; failures = 0
})
;(async () => {
  while (!stop) {
    const started = performance.now()
    try {
      const res = await fetch(workerData.url + "/v1/models")
      await res.arrayBuffer()
      if (res.status !== 200) failures++
    } catch { failures++ }
    const took = performance.now() - started
    count++
    if (took > worst) worst = took
    await new Promise((resolve) => setTimeout(resolve, workerData.gapMs))
  }
  process.exit(0)
})()`

export interface BystanderWindow {
  readonly worst: number
  readonly count: number
  readonly failures: number
}

export const startBystander = (baseUrl: string, gapMs = 5) => {
  const worker = new Worker(bystanderCode, { eval: true, workerData: { url: baseUrl, gapMs } })
  return {
    collect: () => new Promise<BystanderWindow>((resolve) => {
      worker.once("message", resolve)
      worker.postMessage("collect")
    }),
    stop: () => worker.terminate()
  }
}
