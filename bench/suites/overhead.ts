/**
 * Items 1 and 4: gateway overhead next to direct calls and Portkey, and the cost of metering.
 *
 * Arms (all on the same fixed-answer upstream, lib/fixed-upstream.ts, which runs on core 1 beside the generator;
 * every server under test runs alone on core 0):
 * - direct: the generator calls the upstream itself (the floor every other arm is compared with);
 * - bare-proxy: bench/bare-proxy.ts, node:http in and undici out and nothing else — what any Node
 *   proxy pays per request on this machine (the floor of the CPU figures);
 * - floor-proxy: bench/floor-proxy.ts, the bare proxy plus the least a translating, metering gateway
 *   must do per request (key lookup, both bodies parsed and re-encoded, a hold, a log line), in
 *   plain code — a yardstick, never a target: what the gateway spends beyond it is its structure;
 * - gateway: our gateway, embedded database, metering and queues in process;
 * - gateway-unmetered: the same with GATEWAY_METERING=off (no rate limits, no allowance checks;
 *   usage still recorded) — what the checks cost;
 * - gateway+redis: the same with REDIS_URL — rate windows, allowance reservations and capacity
 *   leases are Lua scripts on Redis (item 4: metering embedded vs Redis);
 * - portkey: Portkey's gateway (`x-portkey-provider: openai`, `x-portkey-custom-host`).
 *
 * Per arm: warm-up, a closed-loop saturation probe (its most requests/s; the rig check compares
 * it with the direct arm's), then per run — arms interleaved, order rotated — concurrency 1,
 * each offered rate open loop, and streams (concurrency 1 and one open-loop rate).
 */
import type { Pool } from "undici"
import { makePool, openLoop, type RequestSpec, saturate, sequential, summarize, type LatencySummary } from "../lib/load.ts"
import { clearRedisPrefix, cpuMicros, type Gateway, LOOP_PROBE, type LoopDelay, type Proc, randomToken, startBareProxy, startFixed, startGateway, startPortkey } from "../lib/procs.ts"
import { LONG_FACTOR } from "../lib/fixed-upstream.ts"
import type { Profile } from "../lib/profile.ts"
import { median, medianDistribution, type Distribution } from "../lib/stats.ts"
import { benchChatModel } from "../lib/catalog.ts"

const PROMPT = "Write two sentences about a quiet harbor at dawn."
const MAX_TOKENS = 32
const STREAM_MAX_TOKENS = 48
/** Content deltas of the stream upstream's answer (its `…-long` model has LONG_FACTOR × as many). */
const STREAM_DELTAS = 16
/** Upstream for streams: first token after 20 ms, then a delta every 5 ms (16 deltas). */
const STREAM_UPSTREAM = { ttftMs: 20, gapMs: 5 }

export interface ArmTarget {
  readonly name: string
  readonly pool: Pool
  readonly headers: Record<string, string>
  readonly model: string
  readonly streamModel: string
  /** Pool used for streamed calls (Portkey's streams run on a second, fixed-up process). */
  readonly streamPool: Pool
  readonly streamHeaders: Record<string, string>
  /** The process whose CPU time is charged to this arm. */
  readonly pid: number
  readonly streamPid: number
  /** Event-loop delay of the arm's server since the previous call (gateways only). */
  readonly loopDelay?: () => Promise<LoopDelay | undefined>
}

interface RatePoint {
  readonly rate: number
  readonly summary: LatencySummary
  /** CPU time of the arm's server per answered request, µs. */
  readonly cpuUsPerRequest: number
  /** The server's event-loop delay during the run (gateways only). */
  readonly loop?: LoopDelay | undefined
}

interface ArmRun {
  readonly c1: LatencySummary
  readonly rates: RatePoint[]
  readonly streamC1: LatencySummary
  readonly streamRate: LatencySummary
  /** CPU of the arm's stream server per answered stream: 16 deltas, and LONG_FACTOR × 16. */
  readonly streamCpu: { readonly shortUs: number; readonly longUs: number }
}

const body = (model: string, stream: boolean, long = false) =>
  JSON.stringify({
    model,
    max_tokens: stream ? STREAM_MAX_TOKENS * (long ? LONG_FACTOR : 1) : MAX_TOKENS,
    messages: [{ role: "user", content: PROMPT }],
    ...(stream ? { stream: true } : {})
  })

const spec = (arm: ArmTarget, stream: boolean, long = false): RequestSpec => ({
  pool: stream ? arm.streamPool : arm.pool,
  path: "/v1/chat/completions",
  headers: stream ? arm.streamHeaders : arm.headers,
  body: body(stream ? (long ? `${arm.streamModel}-long` : arm.streamModel) : arm.model, stream, long)
})

const log = (line: string) => console.log(`${stamp()} [overhead] ${line}`)

export interface OverheadResult {
  readonly arms: ReadonlyArray<string>
  readonly notes: ReadonlyArray<string>
  readonly upstream: { readonly json: { ttftMs: number; gapMs: number }; readonly stream: typeof STREAM_UPSTREAM }
  readonly saturation: Record<string, { rps: number; ok: number; failed: number; workers: number; seconds: number }>
  readonly rigCheck: Record<string, { directOverArm: number; latencyRatioC1: number; ok: boolean }>
  readonly runs: Record<string, ArmRun[]>
  readonly median: Record<string, {
    c1: Distribution
    rates: Array<{ rate: number; latencyUs: Distribution; achievedRps: number; sendLagP99Us: number; cpuUsPerRequest: number; non200: number; loopP99Us: number | null }>
    streamC1: { firstTokenUs: Distribution | null; gapUs: Distribution | null }
    streamRate: { rate: number; firstTokenUs: Distribution | null; gapUs: Distribution | null; non200: number }
    /**
     * CPU per answered stream at the stream rate (16 deltas, and LONG_FACTOR × 16), and per SSE
     * frame: the difference ÷ the extra frames. Absent in results from before 2026-11-27.
     */
    streamCpu?: { perStreamUs: number; perLongStreamUs: number; perFrameUs: number; extraFrames: number }
  }>
  /** Per proxy arm: added latency over the direct arm (median of runs, µs). */
  readonly added: Record<string, {
    c1P50Us: number
    c1P99Us: number
    rates: Array<{ rate: number; p50Us: number; p99Us: number }>
    /** Highest offered rate at which the added p99 stayed under 5 ms (every lower rate too); null if none. */
    maxRateP99Under5ms: number | null
    streamC1: { ttftP50Us: number; ttftP99Us: number; gapP50Us: number; gapP99Us: number }
    streamRate: { ttftP50Us: number; ttftP99Us: number; gapP50Us: number; gapP99Us: number }
    rigBound: boolean
  }>
}

const medianOf = (xs: ReadonlyArray<Distribution | undefined>): Distribution | null => {
  const present = xs.filter((x): x is Distribution => x !== undefined)
  return present.length === 0 ? null : medianDistribution(present)
}

const non200 = (s: LatencySummary) => s.requests - s.ok

export const runOverhead = async (profile: Profile, logDir: string, options: { redis: boolean }): Promise<OverheadResult> => {
  const redisUrl = process.env.BENCH_REDIS_URL ?? "redis://127.0.0.1:6379"
  const p = profile.overhead
  const notes: string[] = []
  log("starting the upstreams (core 1), two gateways and Portkey (core 0)")
  const [upstream, streamUpstream] = await Promise.all([
    startFixed(logDir, "upstream", { ttftMs: 0, gapMs: 0 }, 1),
    startFixed(logDir, "upstream-stream", STREAM_UPSTREAM, 1)
  ])
  const config = {
    models: [
      benchModel("svc-bench", "bench-json", `${upstream.url}/v1`),
      benchModel("svc-bench-stream", "bench-stream", `${streamUpstream.url}/v1`),
      benchModel("svc-bench-stream-long", "bench-stream-long", `${streamUpstream.url}/v1`)
    ],
    plans: { bench: { allowanceUsd: 1_000_000_000, rpm: 1_000_000_000, tpm: 1_000_000_000, concurrency: 100_000 } },
    defaultPlan: "bench"
  }
  const adminToken = randomToken()
  const redisPrefix = `bench-${randomToken(4)}:`
  const procs: Proc[] = [upstream, streamUpstream]
  const startRedisGateway = async (): Promise<Gateway | undefined> => {
    if (!options.redis) {
      notes.push(`gateway+redis arm skipped: Redis unreachable at ${redisUrl}`)
      return undefined
    }
    try {
      return await startGateway({ name: "gateway-redis", config, adminToken, logDir, cpu: 0, nodeArgs: LOOP_PROBE, env: { REDIS_URL: redisUrl, GATEWAY_REDIS_PREFIX: redisPrefix } })
    } catch (error) {
      notes.push(`gateway+redis arm skipped: ${String(error).split("\n")[0]}`)
      return undefined
    }
  }
  try {
    const [bare, bareStreams, floor, floorStreams, gateway, gatewayUnmetered, gatewayRedis, portkey, portkeyStreams] = await Promise.all([
      startBareProxy(logDir, 0, upstream.url, LOOP_PROBE),
      startBareProxy(logDir, 0, streamUpstream.url, LOOP_PROBE),
      startBareProxy(logDir, 0, upstream.url, LOOP_PROBE, "floor"),
      startBareProxy(logDir, 0, streamUpstream.url, LOOP_PROBE, "floor"),
      startGateway({ name: "gateway", config, adminToken, logDir, cpu: 0, nodeArgs: LOOP_PROBE }),
      startGateway({ name: "gateway-unmetered", config, adminToken, logDir, cpu: 0, nodeArgs: LOOP_PROBE, env: { GATEWAY_METERING: "off" } }),
      startRedisGateway(),
      startPortkeyOrNote(logDir, notes, "1"),
      startPortkeyOrNote(logDir, notes, "0")
    ])
    procs.push(bare, bareStreams, floor, floorStreams, gateway, gatewayUnmetered)
    if (gatewayRedis !== undefined) procs.push(gatewayRedis)
    if (portkey !== undefined) procs.push(portkey)
    if (portkeyStreams !== undefined) procs.push(portkeyStreams)

    const connections = 512
    const upstreamPool = makePool(upstream.url, connections, 30_000)
    const streamUpstreamPool = makePool(streamUpstream.url, connections, 30_000)
    const json = { "content-type": "application/json", authorization: "Bearer sk-bench" }
    const arms: ArmTarget[] = [
      { name: "direct", pool: upstreamPool, headers: json, model: "bench-json", streamModel: "bench-stream", streamPool: streamUpstreamPool, streamHeaders: json, pid: upstream.pid, streamPid: streamUpstream.pid }
    ]
    const proxyArm = (name: string, proxy: Proc, streams: Proc): ArmTarget => ({
      name,
      pool: makePool(proxy.url, connections, 30_000),
      headers: json,
      model: "bench-json",
      streamModel: "bench-stream",
      streamPool: makePool(streams.url, connections, 30_000),
      streamHeaders: json,
      pid: proxy.pid,
      streamPid: streams.pid,
      loopDelay: proxy.loopDelay
    })
    arms.push(proxyArm("bare-proxy", bare, bareStreams), proxyArm("floor-proxy", floor, floorStreams))
    const gatewayArm = async (name: string, g: Gateway): Promise<ArmTarget> => {
      const key = await g.createKey(`bench-${name}`, "bench")
      const pool = makePool(g.url, connections, 30_000)
      const headers = { "content-type": "application/json", authorization: `Bearer ${key}` }
      return { name, pool, headers, model: "svc-bench", streamModel: "svc-bench-stream", streamPool: pool, streamHeaders: headers, pid: g.pid, streamPid: g.pid, loopDelay: g.loopDelay }
    }
    arms.push(await gatewayArm("gateway", gateway))
    arms.push(await gatewayArm("gateway-unmetered", gatewayUnmetered))
    if (gatewayRedis !== undefined) arms.push(await gatewayArm("gateway+redis", gatewayRedis))
    if (portkey !== undefined && portkeyStreams !== undefined) {
      const portkeyHeaders = (up: Proc) => ({ ...json, "x-portkey-provider": "openai", "x-portkey-custom-host": `${up.url}/v1` })
      arms.push({
        name: "portkey",
        pool: makePool(portkey.url, connections, 30_000),
        headers: portkeyHeaders(upstream),
        model: "bench-json",
        streamModel: "bench-stream",
        streamPool: makePool(portkeyStreams.url, connections, 30_000),
        streamHeaders: portkeyHeaders(streamUpstream),
        pid: portkey.pid,
        streamPid: portkeyStreams.pid
      })
    }

    // Every arm must answer correctly before anything is measured; a proxy arm that does not is
    // dropped with a note (the direct arm and our gateway are required).
    for (const arm of [...arms]) {
      for (const stream of [false, true]) {
        const [s] = await sequential(1, () => spec(arm, stream), stream)
        if (s!.status !== 200 || (stream && s!.firstToken === undefined)) {
          const problem = `${arm.name} ${stream ? "stream" : "request"} failed: status ${s!.status} ${s!.error ?? ""}`.trim()
          if (arm.name === "direct" || arm.name === "gateway") throw new Error(problem)
          notes.push(`${arm.name} arm dropped: ${problem}`)
          arms.splice(arms.indexOf(arm), 1)
          break
        }
      }
    }

    log(`warm-up: up to ${p.warmupRequests} sequential requests (≤ ${p.warmupMs / 1000} s) and 20 streams per arm; the saturation probe that follows warms further`)
    for (const arm of arms) {
      await sequential(p.warmupRequests, () => spec(arm, false), false, p.warmupMs)
      await sequential(20, () => spec(arm, true), true, p.warmupMs)
    }

    log(`saturation probe: closed loop, ${p.saturateWorkers} concurrent, ${p.saturateMs} ms per arm`)
    const saturation: OverheadResult["saturation"] = {}
    for (const arm of arms) {
      saturation[arm.name] = await saturate(p.saturateWorkers, p.saturateMs, () => spec(arm, false))
      log(`  ${arm.name}: ${saturation[arm.name]!.rps.toFixed(0)} req/s`)
      await sleep(500)
    }
    const ratesFor = (arm: string) => p.rates.filter((r, i) => i === 0 || r <= saturation[arm]!.rps * 1.25)

    const runs: Record<string, ArmRun[]> = Object.fromEntries(arms.map((a) => [a.name, []]))
    for (let run = 0; run < profile.runs; run++) {
      const order = arms.map((_, i) => arms[(i + run) % arms.length]!)
      for (const arm of order) {
        log(`run ${run + 1}/${profile.runs} ${arm.name}`)
        const c1 = summarize(await sequential(p.c1Requests, () => spec(arm, false), false, p.c1MaxMs))
        const rates: RatePoint[] = []
        for (const rate of ratesFor(arm.name)) {
          await arm.loopDelay?.()
          const cpu0 = cpuMicros(arm.pid)
          const r = await openLoop({ rate, durationMs: p.rateMs, pick: () => spec(arm, false) })
          const cpu1 = cpuMicros(arm.pid)
          const loop = await arm.loopDelay?.()
          const summary = summarize(r.samples, r.t0)
          rates.push({ rate, summary, cpuUsPerRequest: (cpu1 - cpu0) / Math.max(1, summary.ok), loop })
          log(`  ${rate} req/s → p50 ${(summary.latencyUs.p50 / 1000).toFixed(2)} ms, p99 ${(summary.latencyUs.p99 / 1000).toFixed(2)} ms, ${summary.achievedRps.toFixed(0)} answered/s${non200(summary) > 0 ? `, ${non200(summary)} failed` : ""}`)
          await sleep(300)
        }
        const streamC1 = summarize(await sequential(p.streamC1, () => spec(arm, true), true, p.c1MaxMs))
        const cpuS0 = cpuMicros(arm.streamPid)
        const sr = await openLoop({ rate: p.streamRate, durationMs: p.streamRateMs, pick: () => spec(arm, true), stream: true })
        const cpuS1 = cpuMicros(arm.streamPid)
        const streamRate = summarize(sr.samples, sr.t0)
        await sleep(300)
        // The same streams with LONG_FACTOR × the deltas: the CPU difference is the per-frame cost.
        const cpuL0 = cpuMicros(arm.streamPid)
        const lr = await openLoop({ rate: p.streamRate, durationMs: p.streamRateMs, pick: () => spec(arm, true, true), stream: true })
        const cpuL1 = cpuMicros(arm.streamPid)
        const longRate = summarize(lr.samples, lr.t0)
        const streamCpu = { shortUs: (cpuS1 - cpuS0) / Math.max(1, streamRate.ok), longUs: (cpuL1 - cpuL0) / Math.max(1, longRate.ok) }
        runs[arm.name]!.push({ c1, rates, streamC1, streamRate, streamCpu })
        await sleep(300)
      }
    }

    const med: OverheadResult["median"] = {}
    for (const arm of arms) {
      const rs = runs[arm.name]!
      med[arm.name] = {
        c1: medianDistribution(rs.map((r) => r.c1.latencyUs)),
        rates: ratesFor(arm.name).map((rate) => {
          const points = rs.map((r) => r.rates.find((x) => x.rate === rate)!).filter((x) => x !== undefined)
          return {
            rate,
            latencyUs: medianDistribution(points.map((x) => x.summary.latencyUs)),
            achievedRps: median(points.map((x) => x.summary.achievedRps)),
            sendLagP99Us: median(points.map((x) => x.summary.sendLagUs.p99)),
            cpuUsPerRequest: median(points.map((x) => x.cpuUsPerRequest)),
            non200: median(points.map((x) => non200(x.summary))),
            loopP99Us: points.every((x) => x.loop !== undefined) ? median(points.map((x) => x.loop!.p99)) : null
          }
        }),
        streamC1: { firstTokenUs: medianOf(rs.map((r) => r.streamC1.firstTokenUs)), gapUs: medianOf(rs.map((r) => r.streamC1.gapUs)) },
        streamRate: {
          rate: p.streamRate,
          firstTokenUs: medianOf(rs.map((r) => r.streamRate.firstTokenUs)),
          gapUs: medianOf(rs.map((r) => r.streamRate.gapUs)),
          non200: median(rs.map((r) => non200(r.streamRate)))
        },
        streamCpu: (() => {
          const perStreamUs = median(rs.map((r) => r.streamCpu.shortUs))
          const perLongStreamUs = median(rs.map((r) => r.streamCpu.longUs))
          const extraFrames = STREAM_DELTAS * (LONG_FACTOR - 1)
          return { perStreamUs, perLongStreamUs, perFrameUs: (perLongStreamUs - perStreamUs) / extraFrames, extraFrames }
        })()
      }
    }

    const direct = med["direct"]!
    const rigCheck: OverheadResult["rigCheck"] = {}
    const added: OverheadResult["added"] = {}
    for (const arm of arms.slice(1)) {
      const m = med[arm.name]!
      const ratio = saturation["direct"]!.rps / saturation[arm.name]!.rps
      const latencyRatio = m.c1.p50 / direct.c1.p50
      rigCheck[arm.name] = { directOverArm: ratio, latencyRatioC1: latencyRatio, ok: ratio >= 3 }
      const rates = m.rates.map((x) => {
        const d = direct.rates.find((y) => y.rate === x.rate)
        return { rate: x.rate, p50Us: d === undefined ? Number.NaN : x.latencyUs.p50 - d.latencyUs.p50, p99Us: d === undefined ? Number.NaN : x.latencyUs.p99 - d.latencyUs.p99, achieved: x.achievedRps }
      })
      let maxRate: number | null = null
      for (const r of rates) {
        if (!(r.p99Us < 5000) || r.achieved < r.rate * 0.95) break
        maxRate = r.rate
      }
      const diff = (a: Distribution | null, b: Distribution | null, k: "p50" | "p99") => (a === null || b === null ? Number.NaN : a[k] - b[k])
      added[arm.name] = {
        c1P50Us: m.c1.p50 - direct.c1.p50,
        c1P99Us: m.c1.p99 - direct.c1.p99,
        rates: rates.map(({ rate, p50Us, p99Us }) => ({ rate, p50Us, p99Us })),
        maxRateP99Under5ms: maxRate,
        streamC1: {
          ttftP50Us: diff(m.streamC1.firstTokenUs, direct.streamC1.firstTokenUs, "p50"),
          ttftP99Us: diff(m.streamC1.firstTokenUs, direct.streamC1.firstTokenUs, "p99"),
          gapP50Us: diff(m.streamC1.gapUs, direct.streamC1.gapUs, "p50"),
          gapP99Us: diff(m.streamC1.gapUs, direct.streamC1.gapUs, "p99")
        },
        streamRate: {
          ttftP50Us: diff(m.streamRate.firstTokenUs, direct.streamRate.firstTokenUs, "p50"),
          ttftP99Us: diff(m.streamRate.firstTokenUs, direct.streamRate.firstTokenUs, "p99"),
          gapP50Us: diff(m.streamRate.gapUs, direct.streamRate.gapUs, "p50"),
          gapP99Us: diff(m.streamRate.gapUs, direct.streamRate.gapUs, "p99")
        },
        rigBound: ratio < 3
      }
    }
    await Promise.all(arms.flatMap((a) => [a.pool.close(), a.streamPool === a.pool ? Promise.resolve() : a.streamPool.close()]))
    return {
      arms: arms.map((a) => a.name),
      notes,
      upstream: { json: { ttftMs: 0, gapMs: 0 }, stream: STREAM_UPSTREAM },
      saturation,
      rigCheck,
      runs,
      median: med,
      added
    }
  } finally {
    await Promise.all(procs.map((p) => p.stop()))
    if (options.redis) clearRedisPrefix(redisUrl, redisPrefix)
  }
}

const benchModel = (id: string, upstreamModel: string, baseUrl: string) =>
  benchChatModel(id, `${id} (benchmark)`, [{ id: `${id}-up`, backend: "openai-compatible", capacity: 100000, baseUrl, upstreamModel }])

/** Portkey; on failure (it cannot start here) the arm is dropped with a note, the rest goes on. */
const startPortkeyOrNote = async (logDir: string, notes: string[], stockResponse: "0" | "1") => {
  try {
    return await startPortkey(logDir, 0, stockResponse)
  } catch (error) {
    notes.push(`Portkey arm skipped: it did not start (${String(error).split("\n")[0]})`)
    return undefined
  }
}

const t0 = Date.now()
/** Seconds since the benchmark started, for progress lines. */
export const stamp = () => `${((Date.now() - t0) / 1000).toFixed(0).padStart(5)}s`

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))
