/**
 * A focused measurement of the request path, for profiling work (the full comparison is
 * `npm run bench`): one gateway (core 0) in front of the fixed-answer upstream (core 1, in this
 * process beside the load generator), non-streamed or streamed Chat Completions at a fixed open-loop
 * rate. Prints CPU µs per request of the gateway process, latency p50/p99 and RSS.
 *
 *   node bench/hot-path.ts [--rate 200] [--seconds 20] [--stream] [--prof DIR] [--perf DIR] [--redis] [--unmetered]
 *                          [--node-args "--stack-trace-limit=0"] [--deltas 16] [--gap-ms 0] [--c1 500] [--portkey]
 *                          [--env NAME=VALUE]… [--otlp] [--bare | --floor] [--ttft-ms 0] [--timeline FILE] [--perf-c1]
 *                          [--responses [--store]]
 *
 * `--responses` sends OpenAI Responses requests (`store: false`, or `store: true` with `--store`,
 * OpenAI's default) instead of Chat Completions; the upstream is the same.
 * `--deltas N` sets how many content chunks a streamed answer has and `--gap-ms` paces them, so the
 * per-frame cost of a stream is (CPU at N1 − CPU at N2) / (N1 − N2). `--ttft-ms` holds a stream's
 * first chunk back (the overhead suite's upstream: 20 ms), so the c=1 time to first token
 * (`c1FirstTokenP50Us`/`P99Us`, scheduled start → first content delta) shows what a proxy adds
 * once the first chunk arrives, not the upstream's own start.
 * `--env` passes settings to the gateway (e.g. `GATEWAY_METRICS=off`, `GATEWAY_LOG_LEVEL=none`);
 * `--otlp` starts an OTLP/HTTP receiver in this process (core 1) and points the gateway's
 * `OTEL_EXPORTER_OTLP_ENDPOINT` at it, so traces are exported for real; the spans it received are
 * reported. `node bench/observability.ts` compares these arms.
 *
 * `--bare` runs `bench/bare-proxy.ts` (node:http in, undici out, nothing else) in the gateway's
 * place: the floor any Node proxy pays per request at this rate on this machine. `--floor` runs
 * `bench/floor-proxy.ts`: the bare proxy plus the least work a translating, metering gateway must do
 * (auth lookup, body checks, a hold, both bodies parsed and re-encoded, a log line), in plain code —
 * what the gateway spends beyond it is its own structure.
 *
 * `--timeline FILE` preloads `lib/timeline-probe.ts` into the gateway and prints, at the end, the
 * median timeline of the c=1 phase's requests (`request-timeline.ts`): where a request waits and
 * where the gateway works on it, step by step (its Redis commands and the upstream socket's writes
 * and reads included), and which spans made the slowest 1% slow. It works for `--bare` and
 * `--floor` too, so each span can be read against the floor's.
 *
 * `--prof DIR` starts the gateway with `--cpu-prof --cpu-prof-dir=DIR` (the profile is written when
 * it stops). `--perf DIR` samples its main thread with Linux perf over the measured window instead
 * and prints where the time went, in µs per request (`lib/perf-record.ts`: unlike `--cpu-prof`, it
 * sees the kernel's and node's native share). With `--perf-c1` (and `--timeline`), perf samples the
 * c=1 phase instead, finely, and the timeline lays the samples on each request's spans.
 */
import { mkdtempSync, readdirSync, readFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { parseArgs } from "node:util"
import { fixedUpstreamConfig } from "./lib/catalog.ts"
import { startFixedUpstream } from "./lib/fixed-upstream.ts"
import { startOtlpReceiver } from "./lib/otlp-receiver.ts"
import type { TimelineEvent } from "./lib/timeline-probe.ts"
import { printTimeline } from "./request-timeline.ts"
import { type PerfBreakdown, perfBreakdown, perfNodeArgs, type PerfSample, perfSamples, recordThread } from "./lib/perf-record.ts"
import { makePool, openLoop, sequential, summarize } from "./lib/load.ts"
import { cpuMicros, LOOP_PROBE, pin, randomToken, rssBytes, startBareProxy, startGateway, startPortkey, stopAll, threadMicros, envPairs } from "./lib/procs.ts"

const { values } = parseArgs({
  options: {
    rate: { type: "string", default: "200" },
    seconds: { type: "string", default: "20" },
    stream: { type: "boolean", default: false },
    prof: { type: "string" },
    perf: { type: "string" },
    redis: { type: "boolean", default: false },
    unmetered: { type: "boolean", default: false },
    "node-args": { type: "string", default: "" },
    c1: { type: "string", default: "500" },
    portkey: { type: "boolean", default: false },
    bare: { type: "boolean", default: false },
    floor: { type: "boolean", default: false },
    env: { type: "string", multiple: true, default: [] },
    otlp: { type: "boolean", default: false },
    deltas: { type: "string", default: "16" },
    "ttft-ms": { type: "string", default: "0" },
    "gap-ms": { type: "string", default: "0" },
    timeline: { type: "string" },
    "perf-c1": { type: "boolean", default: false },
    responses: { type: "boolean", default: false },
    store: { type: "boolean", default: false }
  }
})

const rate = Number(values.rate)
const seconds = Number(values.seconds)
const logDir = mkdtempSync(join(tmpdir(), "hot-path-"))
pin(process.pid, 1)
const upstream = await startFixedUpstream({ deltas: Number(values.deltas), gapMs: Number(values["gap-ms"]), ttftMs: Number(values["ttft-ms"]) })
const receiver = values.otlp ? await startOtlpReceiver() : undefined
const extraEnv = envPairs(values.env)
const config = fixedUpstreamConfig(upstream.url)
const nodeArgs = [
  ...LOOP_PROBE,
  ...(values.prof !== undefined ? ["--cpu-prof", `--cpu-prof-dir=${values.prof}`] : []),
  ...(values.perf !== undefined ? perfNodeArgs(values.perf) : []),
  ...(values.timeline !== undefined ? ["--import", join(import.meta.dirname, "lib", "timeline-probe.ts")] : []),
  ...values["node-args"].split(" ").filter((a) => a !== "")
]
const timelineEnv = values.timeline !== undefined ? { BENCH_TIMELINE_FILE: values.timeline, BENCH_UPSTREAM_URL: upstream.url } : {}
const gateway = values.bare || values.floor ? { ...(await startBareProxy(logDir, 0, upstream.url, nodeArgs, values.floor ? "floor" : "bare", { ...timelineEnv, ...extraEnv })), createKey: async () => "sk-bench" }
  : values.portkey ? { ...(await startPortkey(logDir, 0, "1")), createKey: async () => "sk-bench" } : await startGateway({
  name: "gateway",
  config,
  adminToken: randomToken(),
  logDir,
  cpu: 0,
  nodeArgs,
  env: {
    ...(process.env.BENCH_DATABASE_URL !== undefined ? { DATABASE_URL: process.env.BENCH_DATABASE_URL } : {}),
    ...(values.redis ? { REDIS_URL: "redis://127.0.0.1:6379", GATEWAY_REDIS_PREFIX: `hot-${randomToken(4)}:` } : {}),
    ...(values.unmetered ? { GATEWAY_METERING: "off" } : {}),
    ...timelineEnv,
    ...(receiver === undefined ? {} : { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, OTEL_BSP_SCHEDULE_DELAY: "1000" }),
    ...extraEnv
  }
})
let c1Samples: Array<PerfSample> | undefined
try {
  const key = await gateway.createKey("bench", "bench")
  const pool = makePool(gateway.url, 64)
  const spec = {
    pool,
    path: values.responses ? "/v1/responses" : "/v1/chat/completions",
    headers: {
      authorization: `Bearer ${key}`,
      "content-type": "application/json",
      ...(values.portkey ? { "x-portkey-provider": "openai", "x-portkey-custom-host": `${upstream.url}/v1` } : {})
    },
    body: JSON.stringify(values.responses
      ? { model: "svc-bench", max_output_tokens: Math.max(32, Number(values.deltas) + 8), input: "Write two sentences about a quiet harbor at dawn.", store: values.store, ...(values.stream ? { stream: true } : {}) }
      : { model: values.portkey ? "fixed" : "svc-bench", max_tokens: Math.max(32, Number(values.deltas) + 8), messages: [{ role: "user", content: "Write two sentences about a quiet harbor at dawn." }], ...(values.stream ? { stream: true } : {}) })
  }
  const idleRss = rssBytes(gateway.pid)
  await openLoop({ rate, durationMs: 5_000, pick: () => spec, stream: values.stream })
  // `--perf-c1`: sample the c=1 phase instead (finely), to lay the samples on the timeline's steps.
  const c1PerfDir = values["perf-c1"] ? values.perf : undefined
  const c1Perf = c1PerfDir === undefined ? undefined : recordThread(gateway.pid, c1PerfDir, 10_000)
  const c1 = summarize(await sequential(Number(values.c1), () => spec, values.stream))
  await c1Perf?.stop()
  if (c1PerfDir !== undefined) c1Samples = perfSamples(c1PerfDir)
  await gateway.loopDelay()
  const threads = () => Object.fromEntries(readdirSync(`/proc/${gateway.pid}/task`).map((tid) => {
    const name = readFileSync(`/proc/${gateway.pid}/task/${tid}/comm`, "utf8").trim()
    const { user, sys } = threadMicros(gateway.pid, Number(tid))
    return [`${name}#${tid}`, user + sys]
  }))
  const t0 = threads()
  const split0 = threadMicros(gateway.pid, gateway.pid)
  const cpu0 = cpuMicros(gateway.pid)
  const ratePerfDir = values["perf-c1"] ? undefined : values.perf
  const perf = ratePerfDir === undefined ? undefined : recordThread(gateway.pid, ratePerfDir)
  const run = await openLoop({ rate, durationMs: seconds * 1000, pick: () => spec, stream: values.stream })
  const cpu1 = cpuMicros(gateway.pid)
  await perf?.stop()
  const loop = await gateway.loopDelay()
  const s = summarize(run.samples, run.t0)
  const t1 = threads()
  const split1 = threadMicros(gateway.pid, gateway.pid)
  const perThread = Object.entries(t1).map(([k, v]) => [k, Math.round((v - (t0[k] ?? 0)) / s.ok)] as const).filter(([, v]) => v > 0).sort((a, b) => b[1] - a[1])
  const mainThreadRanUs = Math.round((split1.ran - split0.ran) / s.ok)
  if (ratePerfDir !== undefined) printPerf(perfBreakdown(ratePerfDir, Number(process.env.PERF_TOP ?? 40)), mainThreadRanUs)
  console.log(JSON.stringify({
    rate,
    seconds,
    stream: values.stream,
    cpuUsPerRequest: Math.round((cpu1 - cpu0) / s.ok),
    ok: s.ok,
    requests: s.requests,
    c1P50Us: Math.round(c1.latencyUs.p50),
    c1P99Us: Math.round(c1.latencyUs.p99),
    ...(c1.firstTokenUs === undefined ? {} : { c1FirstTokenP50Us: Math.round(c1.firstTokenUs.p50), c1FirstTokenP99Us: Math.round(c1.firstTokenUs.p99) }),
    rateP50Us: Math.round(s.latencyUs.p50),
    rateP99Us: Math.round(s.latencyUs.p99),
    perThreadUs: Object.fromEntries(perThread),
    // The main thread alone (its tid is the pid): the request path, without the database worker and GC threads.
    mainThreadUsPerRequest: perThread.find(([k]) => k.endsWith(`#${gateway.pid}`))?.[1],
    // The scheduler's own count of the time the main thread ran (ns-precise, not sampled at ticks).
    mainThreadRanUs,
    // How many times per request the main thread was put on a core (woken from its wait, mostly):
    // each costs the kernel's switch in and out, and the caches the thread finds cold.
    mainThreadSlices: Math.round(((split1.slices - split0.slices) / s.ok) * 100) / 100,
    // User vs kernel time of the main thread: the kernel's share is mostly the sockets' (loopback TCP).
    mainThreadUserSysUs: [Math.round((split1.user - split0.user) / s.ok), Math.round((split1.sys - split0.sys) / s.ok)],
    loopP99Us: loop?.p99,
    loopMaxUs: loop?.max,
    gc: (loop as { gc?: unknown } | undefined)?.gc,
    // With `--env BENCH_PROBE_CPU_MS=2`: the longest stretch of main-thread CPU between two ticks of a
    // 2 ms timer (a stall that is work, not time waiting for the core).
    cpuMaxUs: loop?.cpuMax,
    ...(receiver === undefined ? {} : { spansReceived: receiver.spans() }),
    env: extraEnv,
    idleRssMiB: Math.round(idleRss / 1048576),
    loadedRssMiB: Math.round(rssBytes(gateway.pid) / 1048576)
  }))
  await pool.close()
} finally {
  await gateway.stop()
  await upstream.close()
  await receiver?.close()
  await stopAll()
}
if (values.timeline !== undefined) printTimeline(JSON.parse(readFileSync(values.timeline, "utf8")) as Array<TimelineEvent>, { samples: c1Samples })

/** The perf samples as µs per request of the main thread (its share × the time it ran per request). */
function printPerf(perf: PerfBreakdown, usPerRequest: number) {
  const us = (share: number) => (share * usPerRequest).toFixed(1).padStart(7)
  console.log(`perf: ${perf.samples} samples of the main thread, ${usPerRequest} µs per request`)
  for (const [area, share] of Object.entries(perf.areas)) console.log(`${us(share)} µs  ${area}`)
  console.log("innermost named frame:")
  for (const [name, share] of perf.self) console.log(`${us(share)} µs  ${name}`)
  console.log("gateway functions, inclusive:")
  for (const [name, share] of perf.inclusive) console.log(`${us(share)} µs  ${name}`)
  console.log("packages' files (innermost named frame):")
  for (const [name, share] of perf.packageFiles) console.log(`${us(share)} µs  ${name}`)
  console.log("JS by the tier V8 ran it in (innermost JS frame):")
  for (const [tier, share] of Object.entries(perf.tiers)) console.log(`${us(share)} µs  ${tier}`)
  console.log("node's own JS, by its caller:")
  for (const [name, share] of perf.nodeCallers) console.log(`${us(share)} µs  ${name}`)
}
