/**
 * How much Effect runtime work the request path does, counted rather than timed: operations (run-loop
 * steps), fibers and fiber resumptions per non-streamed Chat Completion, per streamed one, and per
 * forwarded SSE frame (the difference between a 64-delta and a 16-delta stream, over 48; the deltas
 * arrive `--gap-ms` apart, each on its own read as from a model, unless 0). The
 * gateway runs with `bench/lib/effect-ops-probe.ts` preloaded, in front of the fixed-answer upstream;
 * requests go one at a time after a warm-up, and the probe's totals are read before and after.
 * Counts do not depend on the machine's speed or load, so they compare across VMs and sessions where
 * CPU figures do not (a step that costs ~0.1–0.3 µs on these machines).
 *
 *   node bench/effect-ops.ts [--requests 500] [--stream-requests 60] [--gap-ms 5] [--redis] [--unmetered] [--responses [--store]]
 *
 * `--unmetered` runs it with `GATEWAY_METERING=off` (no rate limits, no allowance), so the
 * difference is metering's own count.
 * `--redis` runs the gateway with its coordination and capacity queues on the local Redis.
 * `--responses` sends OpenAI Responses requests instead (`store: false`; `store: true`, OpenAI's
 * default, with `--store`).
 */
import { mkdtempSync, readFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { parseArgs } from "node:util"
import { benchChatModel } from "./lib/catalog.ts"
import { startFixedUpstream } from "./lib/fixed-upstream.ts"
import { makePool, sequential } from "./lib/load.ts"
import { randomToken, ROOT, startGateway, stopAll } from "./lib/procs.ts"

const { values } = parseArgs({
  options: { requests: { type: "string", default: "500" }, "stream-requests": { type: "string", default: "60" }, "gap-ms": { type: "string", default: "5" }, redis: { type: "boolean", default: false }, unmetered: { type: "boolean", default: false }, responses: { type: "boolean", default: false }, store: { type: "boolean", default: false } }
})
const gapMs = Number(values["gap-ms"])

interface Counts { readonly ops: number; readonly resumptions: number; readonly fibers: number }

const main = async () => {
  const logDir = mkdtempSync(join(tmpdir(), "bench-effect-ops-"))
  const countsFile = join(logDir, "counts.json")
  const short = await startFixedUpstream({ deltas: 16, gapMs })
  const long = await startFixedUpstream({ deltas: 64, gapMs })
  const placement = (id: string, url: string) => ({ id, backend: "openai-compatible", capacity: 100000, baseUrl: `${url}/v1`, upstreamModel: "fixed" })
  const gateway = await startGateway({
    name: "effect-ops",
    config: {
      models: [benchChatModel("svc-bench", "bench", [placement("short-up", short.url)]), benchChatModel("svc-bench-long", "bench long", [placement("long-up", long.url)])],
      embeddingModels: [],
      plans: { bench: { allowanceUsd: 1_000_000, rpm: 10_000_000, tpm: 10_000_000_000, concurrency: 100_000 } },
      defaultPlan: "bench"
    },
    adminToken: randomToken(),
    logDir,
    cpu: 0,
    nodeArgs: ["--import", join(ROOT, "bench", "lib", "effect-ops-probe.ts")],
    env: {
      BENCH_EFFECT_OPS_FILE: countsFile,
      ...(values.unmetered ? { GATEWAY_METERING: "off" } : {}),
      ...(values.redis ? { REDIS_URL: "redis://127.0.0.1:6379", GATEWAY_REDIS_PREFIX: `ops-${randomToken(4)}:` } : {})
    }
  })
  const key = await gateway.createKey("bench", "bench")
  const pool = makePool(gateway.url, 4)
  const spec = (model: string, stream: boolean) => ({
    pool,
    path: values.responses ? "/v1/responses" : "/v1/chat/completions",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    body: JSON.stringify(values.responses
      ? { model, max_output_tokens: 40, input: "Write two sentences about a quiet harbor at dawn.", store: values.store, ...(stream ? { stream: true } : {}) }
      : { model, max_tokens: 40, messages: [{ role: "user", content: "Write two sentences about a quiet harbor at dawn." }], ...(stream ? { stream: true } : {}) })
  })
  const read = async (): Promise<Counts> => {
    process.kill(gateway.pid, "SIGUSR2")
    await new Promise((resolve) => setTimeout(resolve, 200))
    return JSON.parse(readFileSync(countsFile, "utf8")) as Counts
  }
  /** Counts per request over `requests` sequential requests of one kind, after a warm-up of the same. */
  const measure = async (model: string, stream: boolean) => {
    const requests = Number(stream ? values["stream-requests"] : values.requests)
    const request = spec(model, stream)
    await sequential(stream ? 20 : 100, () => request, stream)
    const before = await read()
    const samples = await sequential(requests, () => request, stream)
    const after = await read()
    const failed = samples.filter((sample) => sample.status !== 200).length
    if (failed > 0) throw new Error(`${failed} of ${requests} requests to ${model} failed`)
    const per = (field: keyof Counts) => (after[field] - before[field]) / requests
    return { ops: per("ops"), fibers: per("fibers"), resumptions: per("resumptions") }
  }
  /** What the gateway does with no request in flight (its timers: ledger flush, leases, metrics), per second. */
  const idle = async () => {
    const before = await read()
    await new Promise((resolve) => setTimeout(resolve, 5_000))
    const after = await read()
    const per = (field: keyof Counts) => (after[field] - before[field]) / 5
    return { ops: per("ops"), fibers: per("fibers"), resumptions: per("resumptions") }
  }
  try {
    const quiet = await idle()
    const plain = await measure("svc-bench", false)
    const streamed = await measure("svc-bench", true)
    const streamedLong = await measure("svc-bench-long", true)
    const perFrame = (field: keyof Counts) => (streamedLong[field] - streamed[field]) / 48
    const round = (value: number) => Math.round(value * 10) / 10
    const row = (name: string, counts: Record<keyof Counts, number>) =>
      `| ${name} | ${round(counts.ops)} | ${round(counts.fibers)} | ${round(counts.resumptions)} |`
    console.log(`Effect runtime work on the request path (${values.requests} sequential non-streamed requests, ${values["stream-requests"]} streams of each length with deltas ${gapMs} ms apart, after a warm-up)\n`)
    console.log("| per | operations | fibers | resumptions |\n|---|---:|---:|---:|")
    console.log(row("non-streamed request", plain))
    console.log(row("streamed request (16 deltas)", streamed))
    console.log(row("streamed request (64 deltas)", streamedLong))
    console.log(row("SSE frame (64 − 16 deltas, / 48)", { ops: perFrame("ops"), fibers: perFrame("fibers"), resumptions: perFrame("resumptions") }))
    console.log(row("second with no request (background, counted in the rows above too)", quiet))
  } finally {
    await pool.close()
    await stopAll()
    await short.close()
    await long.close()
  }
}

await main()
