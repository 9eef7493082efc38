/**
 * Item 3: streams and memory. A fresh gateway (embedded database, metering in process) proxies
 * streamed Chat Completions to a paced `gateway simulate` upstream; its model's capacity and the
 * plan's limits are raised so every stream runs at once. Per run, `count` streams are opened over
 * `rampMs` (open loop) and each lasts several seconds, so all of them are open together. The
 * gateway's RSS (/proc/<pid>/status VmRSS) is read idle, every 100 ms under load and `settleMs`
 * after the last stream ended; CPU time per request is the growth of utime + stime
 * (/proc/<pid>/stat) over the run ÷ streams. The gateway gives memory back after
 * `QUIET_TRIM_MS` without requests (`GATEWAY_IDLE_TRIM_MS`, a minute by default; longer than the
 * pause between runs here): the RSS is read once that has happened after start, before any
 * request (the idle figure), and again after the last run.
 *
 * RSS moves with garbage and heap sizing as much as with what the streams hold, so one more run
 * after the measured ones (not in their figures) reads the main thread's heap after a full
 * collection (bench/lib/heap-probe.ts, as `bench/stream-memory.ts` does) before the run and once
 * every stream is open: what the open streams hold, per stream.
 */
import { readFileSync } from "node:fs"
import { join } from "node:path"
import { readHeapProbe } from "../lib/heap-probe-reader.ts"
import { makePool, openLoop, sequential, summarize, type LatencySummary, type Tracker } from "../lib/load.ts"
import { cpuMicros, randomToken, ROOT, rssBytes, startGateway, startSimulate } from "../lib/procs.ts"
import type { Profile } from "../lib/profile.ts"
import { median } from "../lib/stats.ts"
import { sleep, stamp } from "./overhead.ts"
import { benchChatModel } from "../lib/catalog.ts"

const log = (line: string) => console.log(`${stamp()} [streams] ${line}`)
const MiB = 1024 * 1024
/** The gateway's quiet trim (src/util/heap-trim.ts), shortened from its minute so the suite waits less. */
const QUIET_TRIM_MS = 8_000

export interface StreamsRun {
  readonly rssBeforeMiB: number
  readonly rssPeakMiB: number
  /** RSS sampled while the most streams were open. */
  readonly rssAtPeakStreamsMiB: number
  readonly rssAfterMiB: number
  readonly maxOpenStreams: number
  readonly maxInFlight: number
  readonly cpuUsPerRequest: number
  readonly cpuCoreShare: number
  readonly summary: LatencySummary
}

export interface StreamsResult {
  readonly count: number
  readonly upstream: { ttftMs: number; tokensPerSecond: number; maxTokens: number }
  /** Right after start, before any request. */
  readonly rssFreshMiB: number
  /** After a warm-up of 22 short streams, settled. */
  readonly rssIdleMiB: number
  /** The gateway's quiet-trim delay in this suite (`GATEWAY_IDLE_TRIM_MS`). */
  readonly quietTrimMs: number
  /** Idle after start: once the gateway's first quiet trim ran, before any request (undefined: no trim within the wait). */
  readonly rssQuietStartMiB: number | undefined
  /** After the last run, once the gateway's quiet trim ran (undefined: it did not within the wait). */
  readonly rssQuietMiB: number | undefined
  /**
   * The probe run: the main thread's heap (used + external) after a full collection, with every
   * stream open minus before the run, ÷ the streams open; undefined when the probe did not answer.
   */
  readonly heapPerOpenStreamKiB: number | undefined
  readonly runs: StreamsRun[]
  readonly median: {
    readonly rssPeakMiB: number
    readonly rssAtPeakStreamsMiB: number
    readonly rssAfterMiB: number
    readonly maxOpenStreams: number
    readonly cpuUsPerRequest: number
    readonly non200: number
    readonly streamSeconds: number
  }
}

export const runStreams = async (profile: Profile, logDir: string): Promise<StreamsResult> => {
  const p = profile.streams
  const upstream = await startSimulate(logDir, "upstream-streams", p.ttftMs, p.tokensPerSecond, 1)
  const config = {
    models: [
      benchChatModel("svc-stream", "Streams benchmark", [
        { id: "stream-up", backend: "openai-compatible", capacity: p.count * 4, baseUrl: `${upstream.url}/v1`, upstreamModel: "bench-stream" }
      ])
    ],
    plans: { bench: { allowanceUsd: 1_000_000_000, rpm: 1_000_000_000, tpm: 1_000_000_000, concurrency: p.count * 4 } },
    defaultPlan: "bench"
  }
  const gateway = await startGateway({
    name: "gateway-streams", config, adminToken: randomToken(), logDir, cpu: 0, env: { GATEWAY_IDLE_TRIM_MS: String(QUIET_TRIM_MS) },
    nodeArgs: ["--expose-gc", "--import", join(ROOT, "bench", "lib", "heap-probe.ts")]
  })
  // The heap probe answers SIGUSR2 with a line in the gateway's log.
  const heapMiB = async (): Promise<number | undefined> => {
    const report = await readHeapProbe(gateway.pid, join(logDir, "gateway-streams.log"), 20_000)
    return report?.collected === true ? report.heapUsed + report.external : undefined
  }
  // The trim logs a line; `afterTrim` waits for one more than `seen` (the quiet period plus its
  // look interval) and reads the RSS then.
  const trims = () => (readFileSync(join(logDir, "gateway-streams.log"), "utf8").match(/memory trimmed after/g) ?? []).length
  const afterTrim = async (seen: number) => {
    for (let waited = 0; waited < QUIET_TRIM_MS * 2 + 5_000; waited += 250) {
      await sleep(250)
      if (trims() > seen) return rssBytes(gateway.pid)
    }
    return undefined
  }
  try {
    await sleep(1000)
    const rssFresh = rssBytes(gateway.pid)
    // Idle: the server as it sits after start-up once quiet (no request yet, so nothing to wait out).
    const rssQuietStart = await afterTrim(0)
    log(rssQuietStart === undefined ? "no quiet trim after start within the wait" : `RSS idle after start, once quiet (trimmed): ${(rssQuietStart / MiB).toFixed(1)} MiB`)
    const key = await gateway.createKey("bench-streams", "bench")
    const pool = makePool(gateway.url, p.count + 100)
    const request = (maxTokens: number) => () => ({
      pool,
      path: "/v1/chat/completions",
      headers: { "content-type": "application/json", authorization: `Bearer ${key}` },
      body: JSON.stringify({ model: "svc-stream", max_tokens: maxTokens, stream: true, messages: [{ role: "user", content: "Write two sentences about a quiet harbor at dawn." }] })
    })
    const spec = request(p.maxTokens)
    // Warm-up with one-delta streams, so it does not take a full stream's time.
    log("warm-up: 22 short streams")
    const warm = await sequential(2, request(3), true)
    if (warm.some((s) => s.status !== 200)) throw new Error(`streams warm-up failed: ${JSON.stringify(warm.map((s) => s.status))}`)
    await openLoop({ rate: 20, durationMs: 1000, pick: request(3), stream: true })
    await sleep(2000)
    const rssIdle = rssBytes(gateway.pid)
    log(`idle RSS ${(rssIdle / MiB).toFixed(1)} MiB; ${p.count} streams over ${p.rampMs} ms per run`)

    const runs: StreamsRun[] = []
    for (let run = 0; run < profile.runs; run++) {
      const rssBefore = rssBytes(gateway.pid)
      const tracker: Tracker = { inFlight: 0, openStreams: 0 }
      let sampling = true
      let rssPeak = rssBefore
      let maxOpen = 0
      let maxInFlight = 0
      let rssAtPeakStreams = rssBefore
      const sampler = (async () => {
        while (sampling) {
          const rss = rssBytes(gateway.pid)
          rssPeak = Math.max(rssPeak, rss)
          maxInFlight = Math.max(maxInFlight, tracker.inFlight)
          if (tracker.openStreams > maxOpen) {
            maxOpen = tracker.openStreams
            rssAtPeakStreams = rss
          } else if (tracker.openStreams === maxOpen) {
            rssAtPeakStreams = Math.max(rssAtPeakStreams, rss)
          }
          await sleep(100)
        }
      })()
      const cpu0 = cpuMicros(gateway.pid)
      const started = performance.now()
      const result = await openLoop({ rate: (p.count * 1000) / p.rampMs, durationMs: p.rampMs, pick: spec, stream: true, tracker })
      const cpu1 = cpuMicros(gateway.pid)
      const elapsed = performance.now() - started
      sampling = false
      await sampler
      await sleep(p.settleMs)
      const rssAfter = rssBytes(gateway.pid)
      const summary = summarize(result.samples, result.t0)
      runs.push({
        rssBeforeMiB: rssBefore / MiB,
        rssPeakMiB: rssPeak / MiB,
        rssAtPeakStreamsMiB: rssAtPeakStreams / MiB,
        rssAfterMiB: rssAfter / MiB,
        maxOpenStreams: maxOpen,
        maxInFlight,
        cpuUsPerRequest: (cpu1 - cpu0) / result.samples.length,
        cpuCoreShare: (cpu1 - cpu0) / 1000 / elapsed,
        summary
      })
      const r = runs[runs.length - 1]!
      log(`run ${run + 1}/${profile.runs}: ${r.maxOpenStreams} open at once, RSS ${r.rssBeforeMiB.toFixed(1)} → peak ${r.rssPeakMiB.toFixed(1)} → after ${r.rssAfterMiB.toFixed(1)} MiB, CPU ${(r.cpuUsPerRequest / 1000).toFixed(2)} ms/stream, ${summary.requests - summary.ok} failed`)
    }
    await pool.close()
    const rssQuiet = await afterTrim(trims())
    log(rssQuiet === undefined ? "no quiet trim within the wait" : `RSS once quiet (trimmed): ${(rssQuiet / MiB).toFixed(1)} MiB`)

    // The probe run: the same streams, the heap read before and once all are open.
    const heapBefore = await heapMiB()
    const probePool = makePool(gateway.url, p.count + 100)
    const probeTracker: Tracker = { inFlight: 0, openStreams: 0 }
    const probeLoad = openLoop({ rate: (p.count * 1000) / p.rampMs, durationMs: p.rampMs, pick: () => ({ ...spec(), pool: probePool }), stream: true, tracker: probeTracker })
    const rampEnd = performance.now() + p.rampMs + 2_000
    while (probeTracker.openStreams < p.count && performance.now() < rampEnd) await sleep(50)
    const openAtProbe = probeTracker.openStreams
    const heapAtPeak = await heapMiB()
    await probeLoad
    await probePool.close()
    const heapPerOpenStreamKiB = heapBefore === undefined || heapAtPeak === undefined || openAtProbe === 0
      ? undefined
      : ((heapAtPeak - heapBefore) * 1024) / openAtProbe
    log(heapPerOpenStreamKiB === undefined
      ? "heap probe: no answer"
      : `heap probe: ${openAtProbe} streams open, heap after a full GC ${heapBefore!.toFixed(1)} → ${heapAtPeak!.toFixed(1)} MiB: ${heapPerOpenStreamKiB.toFixed(1)} KiB per open stream`)
    return {
      count: p.count,
      upstream: { ttftMs: p.ttftMs, tokensPerSecond: p.tokensPerSecond, maxTokens: p.maxTokens },
      rssFreshMiB: rssFresh / MiB,
      rssIdleMiB: rssIdle / MiB,
      quietTrimMs: QUIET_TRIM_MS,
      rssQuietStartMiB: rssQuietStart === undefined ? undefined : rssQuietStart / MiB,
      rssQuietMiB: rssQuiet === undefined ? undefined : rssQuiet / MiB,
      heapPerOpenStreamKiB,
      runs,
      median: {
        rssPeakMiB: median(runs.map((r) => r.rssPeakMiB)),
        rssAtPeakStreamsMiB: median(runs.map((r) => r.rssAtPeakStreamsMiB)),
        rssAfterMiB: median(runs.map((r) => r.rssAfterMiB)),
        maxOpenStreams: median(runs.map((r) => r.maxOpenStreams)),
        cpuUsPerRequest: median(runs.map((r) => r.cpuUsPerRequest)),
        non200: median(runs.map((r) => r.summary.requests - r.summary.ok)),
        streamSeconds: median(runs.map((r) => r.summary.latencyUs.p50 / 1e6))
      }
    }
  } finally {
    await Promise.all([gateway.stop(), upstream.stop()])
  }
}
