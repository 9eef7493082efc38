/**
 * Sustained load: one gateway (embedded database, metering on) at a fixed open-loop rate of
 * non-streamed Chat Completions for `soak.minutes`, against the fixed-answer upstream. Each
 * minute reports CPU per request, latency p50/p99, event-loop delay p99 and RSS, so a cost that
 * grows with uptime (a sweep over state that only expires after ten minutes, a leak, a table
 * that gets slower as it grows) shows as a trend. The full profile runs past every in-process
 * TTL (the allowance store remembers settled ids for 10 minutes).
 */
import { makePool, openLoop, summarize } from "../lib/load.ts"
import { benchChatModel } from "../lib/catalog.ts"
import { cpuMicros, LOOP_PROBE, randomToken, rssBytes, startFixed, startGateway } from "../lib/procs.ts"
import type { Profile } from "../lib/profile.ts"

export interface SoakMinute {
  readonly minute: number
  readonly answered: number
  readonly failed: number
  readonly cpuUsPerRequest: number
  readonly p50Us: number
  readonly p99Us: number
  readonly loopP99Us: number | null
  readonly rssMiB: number
}

export interface SoakResult {
  readonly rate: number
  readonly minutes: ReadonlyArray<SoakMinute>
  /** Last minute over the first full minute (1 = no change), for CPU, p99 and RSS. */
  readonly drift: { readonly cpu: number; readonly p99: number; readonly rss: number }
}

const log = (line: string) => console.log(`${new Date().toISOString().slice(11, 19)} [soak] ${line}`)

export const runSoak = async (profile: Profile, logDir: string): Promise<SoakResult> => {
  const { rate, minutes } = profile.soak
  const upstream = await startFixed(logDir, "soak-upstream", { ttftMs: 0, gapMs: 0 }, 1)
  const config = {
    models: [benchChatModel("svc-bench", "bench", [{ id: "bench-up", backend: "openai-compatible", capacity: 100000, baseUrl: `${upstream.url}/v1`, upstreamModel: "fixed" }])],
    embeddingModels: [],
    plans: { bench: { allowanceUsd: 1_000_000_000, rpm: 1_000_000_000, tpm: 1_000_000_000, concurrency: 100_000 } },
    defaultPlan: "bench"
  }
  const gateway = await startGateway({ name: "gateway-soak", config, adminToken: randomToken(), logDir, cpu: 0, nodeArgs: LOOP_PROBE })
  try {
    const key = await gateway.createKey("soak", "bench")
    const pool = makePool(gateway.url, 256, 30_000)
    const spec = {
      pool,
      path: "/v1/chat/completions",
      headers: { "content-type": "application/json", authorization: `Bearer ${key}` },
      body: JSON.stringify({ model: "svc-bench", max_tokens: 32, messages: [{ role: "user", content: "Write two sentences about a quiet harbor at dawn." }] })
    }
    log(`${rate} req/s for ${minutes} min`)
    await openLoop({ rate, durationMs: 5_000, pick: () => spec })
    await gateway.loopDelay()
    const out: Array<SoakMinute> = []
    for (let minute = 1; minute <= minutes; minute++) {
      const cpu0 = cpuMicros(gateway.pid)
      const run = await openLoop({ rate, durationMs: 60_000, pick: () => spec })
      const cpu1 = cpuMicros(gateway.pid)
      const loop = await gateway.loopDelay()
      const s = summarize(run.samples, run.t0)
      const point: SoakMinute = {
        minute,
        answered: s.ok,
        failed: s.requests - s.ok,
        cpuUsPerRequest: Math.round((cpu1 - cpu0) / Math.max(1, s.ok)),
        p50Us: Math.round(s.latencyUs.p50),
        p99Us: Math.round(s.latencyUs.p99),
        loopP99Us: loop?.p99 ?? null,
        rssMiB: Math.round(rssBytes(gateway.pid) / 1048576)
      }
      out.push(point)
      log(`minute ${minute}: ${point.cpuUsPerRequest} µs CPU/req, p50 ${point.p50Us} µs, p99 ${point.p99Us} µs, loop p99 ${point.loopP99Us} µs, RSS ${point.rssMiB} MiB${point.failed > 0 ? `, ${point.failed} failed` : ""}`)
    }
    await pool.close()
    const first = out[0]!
    const last = out[out.length - 1]!
    return {
      rate,
      minutes: out,
      drift: { cpu: last.cpuUsPerRequest / first.cpuUsPerRequest, p99: last.p99Us / first.p99Us, rss: last.rssMiB / first.rssMiB }
    }
  } finally {
    await gateway.stop()
    await upstream.stop()
  }
}
