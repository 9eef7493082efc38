/**
 * Batches benchmark: a 1,000-request Messages batch on a model of capacity 8 while interactive
 * traffic offers 50% of that capacity.
 *
 *   node bench/batches.ts            1,000 requests, 30 s of interactive traffic alone
 *   node bench/batches.ts --quick    300 requests, 10 s alone (smoke check)
 *   npm run bench -- --only=batches  the same, as a section of the load benchmark
 *
 * Setup: one gateway (embedded database) pinned to core 0, this process (the client) on core 1.
 * The model has one simulated placement of capacity 8 whose every answer takes `SERVICE_MS` (time
 * to first token; no streaming delay), so a slot is held for about that long.
 *
 * Interactive traffic: Poisson arrivals (seeded) of non-streamed chat completions at
 * 0.5 × 8 / service time per second, first alone (the baseline), then while the batch runs (from
 * its create until it has ended). Wait = latency − the median latency of an unloaded request.
 *
 * Idle capacity the batch used: `GET /admin/v1/queues` is sampled every 50 ms while the batch runs;
 * slot-seconds in use (∫ inUse) minus the interactive requests' (their count × the unloaded
 * service time) is what the batch used; it is divided by the slot-seconds interactive traffic
 * left idle (8 × batch time − interactive slot-seconds).
 * Writes bench/results/batches-<stamp>.json and batches-latest.md.
 */
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs"
import { loadavg, tmpdir } from "node:os"
import { join } from "node:path"
import { parseArgs } from "node:util"
import { benchChatModel } from "./lib/catalog.ts"
import { makePool, type RequestSpec, type Sample, send } from "./lib/load.ts"
import { LOOP_PROBE, type LoopDelay, pin, ROOT, startGateway, stopAll } from "./lib/procs.ts"
import { type Distribution, distribution, median, round } from "./lib/stats.ts"

export interface BatchesOptions {
  readonly quick: boolean
}

const CAPACITY = 8
/** How long every answer takes (`BENCH_BATCH_SERVICE_MS`, default 500). */
const SERVICE_MS = Number(process.env.BENCH_BATCH_SERVICE_MS ?? 500)
const LOAD = 0.5
const PLACEMENT = "batch-bench-a"
const MODEL = "svc-batch-bench"

const config = () => ({
  models: [benchChatModel(MODEL, "Batch benchmark (simulated)", [{ id: PLACEMENT, backend: "simulator", capacity: CAPACITY, simulator: { ttftMs: SERVICE_MS, tokensPerSecond: 0 } }])],
  plans: { bench: { allowanceUsd: 1_000_000_000, rpm: 1_000_000_000, tpm: 1_000_000_000, concurrency: 100_000 } },
  defaultPlan: "bench"
})

export interface BatchesResult {
  readonly requests: number
  readonly capacity: number
  readonly serviceMs: number
  readonly interactiveRatePerSecond: number
  readonly unloadedLatencyMs: number
  readonly batchCompletionSeconds: number
  /** Batch requests per second of batch time. */
  readonly batchThroughput: number
  readonly interactiveWaitAloneMs: Distribution
  readonly interactiveWaitWithBatchMs: Distribution
  readonly interactiveErrors: number
  readonly p99GrowthMs: number
  readonly idleCapacityUsed: number
  readonly meanSlotsInUseWithBatch: number
  /** The gateway's main-thread event-loop delay (p99 / max, ms) in each phase. */
  readonly loopDelayAloneMs: { p99: number; max: number } | null
  readonly loopDelayWithBatchMs: { p99: number; max: number } | null
  readonly counts: Record<string, number>
}

const loopMs = (d: LoopDelay | undefined) => d === undefined ? null : { p99: round(d.p99 / 1000, 1), max: round(d.max / 1000, 1) }

/** A seeded uniform generator (mulberry32), so every run offers the same arrival times. */
const seeded = (seed: number) => () => {
  seed = (seed + 0x6d2b79f5) | 0
  let t = Math.imul(seed ^ (seed >>> 15), 1 | seed)
  t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296
}

/** Poisson arrivals at `rate` per second until `stop()` says so; resolves with every sample. */
const poisson = async (rate: number, spec: RequestSpec, stop: () => boolean, seed: number) => {
  const random = seeded(seed)
  const pending: Array<Promise<Sample>> = []
  let at = performance.now()
  while (!stop()) {
    at += (-Math.log(1 - random()) / rate) * 1000
    const wait = at - performance.now()
    if (wait > 0) await new Promise((r) => setTimeout(r, wait))
    if (stop()) break
    pending.push(send(spec, at, false))
  }
  return Promise.all(pending)
}

export const runBatches = async (options: BatchesOptions, logDir: string): Promise<BatchesResult> => {
  const requests = options.quick ? 300 : 1_000
  const aloneMs = options.quick ? 10_000 : 30_000
  const rate = (LOAD * CAPACITY * 1000) / SERVICE_MS
  const gw = await startGateway({
    name: "batches",
    config: config(),
    adminToken: `bench-${Date.now()}`,
    logDir,
    cpu: 0,
    nodeArgs: LOOP_PROBE,
    env: { GATEWAY_BATCH_POLL_MS: "100", ...(process.env.BENCH_BATCH_DATABASE_URL === undefined ? {} : { DATABASE_URL: process.env.BENCH_BATCH_DATABASE_URL }) }
  })
  try {
    const interactiveKey = await gw.createKey("interactive", "bench")
    const batchKey = await gw.createKey("batch", "bench")
    const pool = makePool(gw.url, 256)
    const chat: RequestSpec = {
      pool,
      path: "/v1/chat/completions",
      headers: { authorization: `Bearer ${interactiveKey}`, "content-type": "application/json" },
      body: JSON.stringify({ model: MODEL, max_tokens: 16, messages: [{ role: "user", content: "say exactly: ok" }] })
    }
    // Unloaded latency: one request at a time.
    const unloaded: Array<number> = []
    for (let i = 0; i < 20; i++) {
      const s = await send(chat, performance.now(), false)
      if (i >= 5) unloaded.push(s.end - s.sent)
    }
    const base = median(unloaded)
    const waits = (samples: ReadonlyArray<Sample>) => samples.filter((s) => s.status === 200).map((s) => Math.max(0, s.end - s.scheduled - base))

    // Interactive traffic alone.
    await gw.loopDelay()
    const aloneUntil = performance.now() + aloneMs
    const alone = await poisson(rate, chat, () => performance.now() >= aloneUntil, 1)
    const loopAlone = await gw.loopDelay()

    // The batch, with interactive traffic for as long as it runs.
    const body = JSON.stringify({
      requests: Array.from({ length: requests }, (_, i) => ({
        custom_id: `bench-${i}`,
        params: { model: MODEL, max_tokens: 16, messages: [{ role: "user", content: `say exactly: item ${i}` }] }
      }))
    })
    const headers = { "x-api-key": batchKey, "content-type": "application/json" }
    const started = performance.now()
    const created = await fetch(`${gw.url}/v1/messages/batches`, { method: "POST", headers, body })
    if (created.status !== 200) throw new Error(`batch create: ${created.status} ${await created.text()}`)
    const batchId = ((await created.json()) as { id: string }).id
    let ended = false
    let endedAt = 0
    let counts: Record<string, number> = {}
    let inUseSum = 0
    let inUseSamples = 0
    const watch = (async () => {
      while (!ended) {
        const [batch, queues] = await Promise.all([
          fetch(`${gw.url}/v1/messages/batches/${batchId}`, { headers }).then((r) => r.json()) as Promise<any>,
          gw.admin("GET", "/admin/v1/queues")
        ])
        const placement = (queues.data as Array<any>).find((p) => p.placementId === PLACEMENT)
        if (placement !== undefined) {
          inUseSum += placement.inUse
          inUseSamples++
        }
        if (batch.processing_status === "ended") {
          ended = true
          endedAt = performance.now()
          counts = batch.request_counts
        } else await new Promise((r) => setTimeout(r, 50))
      }
    })()
    const withBatch = await poisson(rate, chat, () => ended, 2)
    await watch
    const loopWithBatch = await gw.loopDelay()
    const batchSeconds = (endedAt - started) / 1000
    const served = withBatch.filter((s) => s.status === 200 && s.scheduled >= started && s.end <= endedAt).length
    const interactiveSlotSeconds = (served * SERVICE_MS) / 1000
    const meanInUse = inUseSamples === 0 ? Number.NaN : inUseSum / inUseSamples
    const usedSlotSeconds = meanInUse * batchSeconds
    const idleSlotSeconds = CAPACITY * batchSeconds - interactiveSlotSeconds
    const aloneWait = distribution(waits(alone))
    const withWait = distribution(waits(withBatch))
    await pool.close()
    return {
      requests,
      capacity: CAPACITY,
      serviceMs: SERVICE_MS,
      interactiveRatePerSecond: rate,
      unloadedLatencyMs: round(base, 1),
      batchCompletionSeconds: round(batchSeconds, 2),
      batchThroughput: round(requests / batchSeconds, 1),
      interactiveWaitAloneMs: aloneWait,
      interactiveWaitWithBatchMs: withWait,
      interactiveErrors: [...alone, ...withBatch].filter((s) => s.status !== 200).length,
      p99GrowthMs: round(withWait.p99 - aloneWait.p99, 1),
      idleCapacityUsed: round((usedSlotSeconds - interactiveSlotSeconds) / idleSlotSeconds, 3),
      meanSlotsInUseWithBatch: round(meanInUse, 2),
      loopDelayAloneMs: loopMs(loopAlone),
      loopDelayWithBatchMs: loopMs(loopWithBatch),
      counts
    }
  } finally {
    await gw.stop()
  }
}

const ms = (d: Distribution) => `p50 ${round(d.p50, 1)} ms, p99 ${round(d.p99, 1)} ms (n = ${d.count})`

export const batchesMarkdown = (r: BatchesResult) =>
  [
    "## Batches",
    "",
    `A ${r.requests}-request Messages batch on one placement of capacity ${r.capacity} (every answer takes ${r.serviceMs} ms), with interactive`,
    `chat completions arriving (Poisson) at ${r.interactiveRatePerSecond}/s — 50% of capacity. Unloaded latency ${r.unloadedLatencyMs} ms.`,
    "",
    "| figure | value |",
    "|---|---|",
    `| batch completion time | ${r.batchCompletionSeconds} s (${r.batchThroughput} requests/s; counts ${JSON.stringify(r.counts)}) |`,
    `| interactive wait, alone | ${ms(r.interactiveWaitAloneMs)} |`,
    `| interactive wait, with the batch | ${ms(r.interactiveWaitWithBatchMs)} |`,
    `| interactive p99 wait growth | ${r.p99GrowthMs} ms (target: ≤ one batch request's service time, ${r.serviceMs} ms) |`,
    `| idle capacity the batch used | ${round(r.idleCapacityUsed * 100, 1)}% (target ≥ 90%); mean slots in use ${r.meanSlotsInUseWithBatch} of ${r.capacity} |`,
    `| interactive errors | ${r.interactiveErrors} |`,
    `| gateway event-loop delay p99 / max, alone | ${r.loopDelayAloneMs?.p99 ?? "–"} / ${r.loopDelayAloneMs?.max ?? "–"} ms |`,
    `| gateway event-loop delay p99 / max, with the batch | ${r.loopDelayWithBatchMs?.p99 ?? "–"} / ${r.loopDelayWithBatchMs?.max ?? "–"} ms |`,
    ""
  ].join("\n")

if (import.meta.main) {
  const { values } = parseArgs({ options: { quick: { type: "boolean", default: false } } })
  pin(process.pid, 1)
  const logDir = mkdtempSync(join(tmpdir(), "bench-batches-"))
  console.log(`batches benchmark${values.quick ? " (quick)" : ""}; load average ${loadavg().map((l) => l.toFixed(2)).join(" ")}; logs in ${logDir}`)
  try {
    const result = await runBatches({ quick: values.quick ?? false }, logDir)
    const outDir = join(ROOT, "bench", "results")
    mkdirSync(outDir, { recursive: true })
    const stamp = new Date().toISOString().replace(/\..*$/, "Z").replace(/:/g, "-")
    writeFileSync(join(outDir, `batches-${stamp}.json`), `${JSON.stringify({ loadAverage: loadavg(), ...result }, null, 1)}\n`)
    const md = batchesMarkdown(result)
    writeFileSync(join(outDir, "batches-latest.md"), md)
    console.log(md)
  } finally {
    await stopAll()
  }
}
