/**
 * The embedded database's cost to the gateway process (issue #12, direction 5), measured on its own:
 *
 * - start-up, twice per run: on a new data dir (the first start creates the database) and again on
 *   the same dir (a restart): time from spawn to "gateway listening", and the start-up peak (VmHWM
 *   of the whole process, every thread included, read once it listens);
 * - idle RSS: VmRSS after `--idle-ms` of quiet once the restarted gateway listens;
 * - the main thread's event-loop delay (p50/p99/max, `monitorEventLoopDelay` at 1 ms resolution,
 *   preloaded with bench/lib/loop-probe.ts) while `--rate` non-streamed chat completions per
 *   second run open loop against it for `--load-ms` (the usage ledger flushes once a second);
 *   RSS and VmHWM after the load;
 * - a ledger flush's cost to the main thread, in a separate process (`--flush`): the real
 *   DatabaseLive + UsageLedger, `--rate` entries (one second's worth, ids from the gateway's own
 *   `newId`) recorded then flushed, `--flushes` times, after `--prefill` rows were written first
 *   (a ledger that has grown: the id index's locality is then what a row costs); main-thread CPU
 *   (`process.threadCpuUsage`), wall time (the statement included: the main thread waits for it)
 *   and the longest event-loop stall during the flushes.
 *
 * The upstream is a minimal fixed-answer server in a child process (`--upstream`), so it costs
 * the rig next to nothing. The gateway's main thread is pinned to core 0 once it listens (only that
 * thread: its database worker, libuv and GC helper threads may use either core, as they would on
 * any multi-core host); the generator and the upstream are pinned to core 1.
 * Each figure is the median over `--runs` runs (each run a fresh data dir); the spread is printed.
 *
 *   node bench/embedded-db.ts [--runs=3] [--rate=200] [--load-ms=20000] [--idle-ms=5000]
 *                             [--engine=embedded|postgres] [--env=NAME=VALUE ...] [--json=out.json]
 *   node bench/embedded-db.ts --flush [--rate=200] [--flushes=30] [--prefill=0] [--engine=…]
 */
import { type ChildProcess, execFileSync, spawn } from "node:child_process"
import { createWriteStream, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { createServer } from "node:http"
import { loadavg, tmpdir } from "node:os"
import { join } from "node:path"
import { parseArgs } from "node:util"
import { makePool, openLoop, summarize } from "./lib/load.ts"
import { NODE, ROOT, cpuMicros, randomToken, rssBytes, spawnPinned, stopAll, envPairs } from "./lib/procs.ts"
import { median } from "./lib/stats.ts"
import { benchChatModel } from "./lib/catalog.ts"

const MiB = 1024 * 1024
const { values } = parseArgs({
  options: {
    runs: { type: "string", default: "3" },
    rate: { type: "string", default: "200" },
    "load-ms": { type: "string", default: "20000" },
    "idle-ms": { type: "string", default: "5000" },
    flushes: { type: "string", default: "30" },
    prefill: { type: "string", default: "0" },
    engine: { type: "string", default: "embedded" },
    env: { type: "string", multiple: true, default: [] },
    json: { type: "string" },
    upstream: { type: "boolean", default: false },
    flush: { type: "boolean", default: false },
    "skip-flush": { type: "boolean", default: false },
    "skip-load": { type: "boolean", default: false }
  }
})
const runs = Number(values.runs)
const rate = Number(values.rate)
const extraEnv = envPairs(values.env)

const statusField = (pid: number, field: string): number => {
  const m = new RegExp(`${field}:\\s+(\\d+) kB`).exec(readFileSync(`/proc/${pid}/status`, "utf8"))
  return m === null ? Number.NaN : Number(m[1]) * 1024
}
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))
const mib = (bytes: number) => Math.round((bytes / MiB) * 10) / 10

// ---------------------------------------------------------------------------------------------
// --upstream: a fixed answer, JSON or SSE (the gateway may call its upstream streamed).
// ---------------------------------------------------------------------------------------------
const serveUpstream = () => {
  const usage = { prompt_tokens: 12, completion_tokens: 8, total_tokens: 20 }
  const chunk = (model: string, delta: object, finish: string | null, extra: object = {}) =>
    `data: ${JSON.stringify({ id: "chatcmpl-bench", object: "chat.completion.chunk", created: 1767225600, model, choices: [{ index: 0, delta, finish_reason: finish }], ...extra })}\n\n`
  const server = createServer((req, res) => {
    let body = ""
    req.on("data", (d) => (body += d))
    req.on("end", () => {
      const request = JSON.parse(body || "{}") as { model?: string; stream?: boolean }
      const model = request.model ?? "bench"
      if (request.stream === true) {
        res.writeHead(200, { "content-type": "text/event-stream" })
        res.end(
          chunk(model, { role: "assistant", content: "The harbor is quiet." }, null) +
          chunk(model, {}, "stop") +
          `data: ${JSON.stringify({ id: "chatcmpl-bench", object: "chat.completion.chunk", created: 1767225600, model, choices: [], usage })}\n\n` +
          "data: [DONE]\n\n"
        )
        return
      }
      res.writeHead(200, { "content-type": "application/json" })
      res.end(JSON.stringify({
        id: "chatcmpl-bench", object: "chat.completion", created: 1767225600, model,
        choices: [{ index: 0, message: { role: "assistant", content: "The harbor is quiet." }, finish_reason: "stop" }],
        usage
      }))
    })
  })
  server.listen(0, "127.0.0.1", () => console.log(`upstream listening on http://127.0.0.1:${(server.address() as { port: number }).port}`))
}

// ---------------------------------------------------------------------------------------------
// --flush: the ledger flush's main-thread cost, in this process.
// ---------------------------------------------------------------------------------------------
const measureFlush = async () => {
  const { Effect, Layer } = await import("effect")
  const { monitorEventLoopDelay } = await import("node:perf_hooks")
  const { Settings } = await import("../src/config/settings.ts")
  const { DatabaseLive } = await import("../src/storage/database.ts")
  const { UsageLedger } = await import("../src/metering/usage-ledger.ts")
  const { newId } = await import("../src/util/ids.ts")
  const dir = mkdtempSync(join(tmpdir(), "bench-flush-"))
  const settings = Settings.layerWith({ dataDir: join(dir, "data"), ...(values.engine === "postgres" ? {} : { databaseUrl: undefined }) })
  const layer = UsageLedger.layerWith({ flushIntervalMs: 3_600_000, batchSize: 1_000_000 }).pipe(
    Layer.provideMerge(DatabaseLive),
    Layer.provide(settings)
  )
  const flushes = Number(values.flushes)
  const results: Array<{ cpuUs: number; wallUs: number; maxStallUs: number }> = []
  const prefill = Math.ceil(Number(values.prefill) / rate)
  const program = Effect.gen(function*() {
    const ledger = yield* UsageLedger
    const fill = Effect.gen(function*() {
      for (let i = 0; i < rate; i++) {
        yield* ledger.record({
          keyId: `key_${i % 4}`, model: "svc-bench", requestId: newId("call"),
          usage: { inputTokens: 12, outputTokens: 8, cachedInputTokens: 0, reasoningTokens: 0 },
          costMicros: 5, at: new Date()
        })
      }
    })
    // Warm-up (connection, prepared statements, JIT), and the rows of a ledger that has grown.
    for (let i = 0; i < Math.max(3, prefill); i++) {
      yield* fill
      yield* ledger.flush()
    }
    for (let i = 0; i < flushes; i++) {
      yield* fill
      yield* Effect.sleep("20 millis")
      const histogram = monitorEventLoopDelay({ resolution: 1 })
      histogram.enable()
      const cpu0 = process.threadCpuUsage()
      const t0 = performance.now()
      yield* ledger.flush()
      const wallUs = (performance.now() - t0) * 1000
      const cpu = process.threadCpuUsage(cpu0)
      yield* Effect.sleep("5 millis")
      histogram.disable()
      results.push({ cpuUs: cpu.user + cpu.system, wallUs, maxStallUs: histogram.max / 1000 })
    }
  })
  await Effect.runPromise(Effect.scoped(Effect.provide(program, layer)))
  rmSync(dir, { recursive: true, force: true })
  const pick = (k: keyof (typeof results)[number]) => results.map((r) => r[k])
  const sorted = (xs: number[]) => [...xs].sort((a, b) => a - b)
  console.log(JSON.stringify({
    rows: rate,
    prefilled: prefill * rate,
    cpuUs: { p50: median(pick("cpuUs")), max: Math.max(...pick("cpuUs")) },
    wallUs: { p50: median(pick("wallUs")), max: Math.max(...pick("wallUs")) },
    maxStallUs: { p50: median(pick("maxStallUs")), p90: sorted(pick("maxStallUs"))[Math.floor(results.length * 0.9)], max: Math.max(...pick("maxStallUs")) }
  }))
}

// ---------------------------------------------------------------------------------------------
// The gateway runs.
// ---------------------------------------------------------------------------------------------
interface GatewayRun {
  firstStartMs: number
  firstStartPeakMiB: number
  startMs: number
  startPeakMiB: number
  readyRssMiB: number
  idleRssMiB: number
  load?: {
    eldP50Us: number; eldP99Us: number; eldMaxUs: number; ok: number; non200: number; latencyP99Us: number; rssMiB: number; hwmMiB: number
    /** CPU per answered request: the whole process (every thread) and its main thread alone, µs. */
    cpuUsPerRequest: number; mainThreadCpuUsPerRequest: number
  }
  stopMs: number
}

/** User + system CPU time of one thread of a process so far, µs (clock-tick resolution). */
const threadCpuMicros = (pid: number, tid: number): number => {
  const stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, "utf8")
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
  return ((Number(fields[11]) + Number(fields[12])) / CLK_TCK) * 1e6
}
const CLK_TCK = Number(execFileSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).trim()) || 100

/** Pins one thread (the main thread: its tid is the pid) to a core; the process's other threads stay free. */
const pinThread = (tid: number, cpu: number) => execFileSync("taskset", ["-p", "-c", String(cpu), String(tid)], { stdio: "ignore" })

const runGateway = async (logDir: string, upstreamUrl: string, postgresUrl: string | undefined): Promise<GatewayRun> => {
  const dir = mkdtempSync(join(tmpdir(), "bench-embedded-db-"))
  const probeFile = join(dir, "probe.json")
  const configFile = join(dir, "config.json")
  writeFileSync(configFile, JSON.stringify({
    models: [benchChatModel("svc-bench", "svc-bench (benchmark)", [
      { id: "svc-bench-up", backend: "openai-compatible", capacity: 100000, baseUrl: `${upstreamUrl}/v1`, upstreamModel: "bench-json" }
    ])],
    plans: { bench: { allowanceUsd: 1_000_000_000, rpm: 1_000_000_000, tpm: 1_000_000_000, concurrency: 100_000 } },
    defaultPlan: "bench"
  }))
  const adminToken = randomToken()
  const start = async () => {
    const t0 = performance.now()
    const gateway = await spawnGateway(logDir, {
      GATEWAY_CONFIG: configFile,
      GATEWAY_DATA_DIR: join(dir, "data"),
      GATEWAY_ADMIN_TOKEN: adminToken,
      BENCH_PROBE_FILE: probeFile,
      ...(postgresUrl === undefined ? {} : { DATABASE_URL: postgresUrl }),
      ...extraEnv
    })
    return { gateway, ms: performance.now() - t0, peak: statusField(gateway.pid, "VmHWM") }
  }
  const first = await start()
  await first.gateway.stop()
  const { gateway, ms: startMs, peak: startPeak } = await start()
  const readyRss = rssBytes(gateway.pid)
  await sleep(Number(values["idle-ms"]))
  const idleRss = rssBytes(gateway.pid)
  const run: GatewayRun = {
    firstStartMs: Math.round(first.ms), firstStartPeakMiB: mib(first.peak),
    startMs: Math.round(startMs), startPeakMiB: mib(startPeak), readyRssMiB: mib(readyRss), idleRssMiB: mib(idleRss), stopMs: 0
  }
  if (!values["skip-load"]) {
    const res = await fetch(`${gateway.url}/admin/v1/keys`, {
      method: "POST",
      headers: { authorization: `Bearer ${adminToken}`, "content-type": "application/json" },
      body: JSON.stringify({ name: "bench", plan: "bench" })
    })
    const key = ((await res.json()) as { key: string }).key
    const pool = makePool(gateway.url, 256, 30_000)
    const spec = {
      pool,
      path: "/v1/chat/completions",
      headers: { "content-type": "application/json", authorization: `Bearer ${key}` },
      body: JSON.stringify({ model: "svc-bench", max_tokens: 32, messages: [{ role: "user", content: "Write two sentences about a quiet harbor at dawn." }] })
    }
    // Warm-up (JIT, connections), then a fresh probe window for the measured load.
    await openLoop({ rate, durationMs: 3_000, pick: () => spec })
    process.kill(gateway.pid, "SIGUSR2")
    await sleep(200)
    const cpu0 = cpuMicros(gateway.pid)
    const mainCpu0 = threadCpuMicros(gateway.pid, gateway.pid)
    const loaded = await openLoop({ rate, durationMs: Number(values["load-ms"]), pick: () => spec })
    const cpu = cpuMicros(gateway.pid) - cpu0
    const mainCpu = threadCpuMicros(gateway.pid, gateway.pid) - mainCpu0
    process.kill(gateway.pid, "SIGUSR2")
    await sleep(300)
    const probe = JSON.parse(readFileSync(probeFile, "utf8")) as { p50: number; p99: number; max: number }
    const summary = summarize(loaded.samples, loaded.t0)
    run.load = {
      eldP50Us: Math.round(probe.p50), eldP99Us: Math.round(probe.p99), eldMaxUs: Math.round(probe.max),
      ok: summary.ok, non200: summary.requests - summary.ok, latencyP99Us: Math.round(summary.latencyUs.p99),
      rssMiB: mib(rssBytes(gateway.pid)), hwmMiB: mib(statusField(gateway.pid, "VmHWM")),
      cpuUsPerRequest: Math.round(cpu / summary.ok), mainThreadCpuUsPerRequest: Math.round(mainCpu / summary.ok)
    }
    await pool.close()
  }
  const s0 = performance.now()
  await gateway.stop()
  run.stopMs = Math.round(performance.now() - s0)
  rmSync(dir, { recursive: true, force: true })
  return run
}

/** `node --import loop-probe src/main.ts serve`, main thread pinned to core 0 once it listens. */
const spawnGateway = async (logDir: string, env: Record<string, string>) => {
  const child = spawn(NODE, ["--import", join(ROOT, "bench", "lib", "loop-probe.ts"), join(ROOT, "src", "main.ts"), "serve", "--host", "127.0.0.1", "--port", "0"], {
    cwd: ROOT,
    env: { ...cleanEnv(), ...env },
    stdio: ["ignore", "pipe", "pipe"]
  })
  let output = ""
  const log = createWriteStream(join(logDir, `gateway-${child.pid}.log`))
  const collect = (d: Buffer) => {
    log.write(d)
    if (output.length < 64_000) output += d.toString()
  }
  child.stdout!.on("data", collect)
  child.stderr!.on("data", collect)
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()))
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`the gateway did not start in time:\n${output}`)), 180_000)
    const check = () => {
      const m = /gateway listening on (http:\/\/\S+)/.exec(output)
      if (m !== null) {
        clearTimeout(timer)
        resolve(m[1]!)
      }
    }
    child.stdout!.on("data", check)
    child.stderr!.on("data", check)
    child.once("exit", (code) => {
      clearTimeout(timer)
      reject(new Error(`the gateway exited with ${code} before it was ready:\n${output}`))
    })
  })
  pinThread(child.pid!, 0)
  return {
    pid: child.pid!,
    url,
    stop: async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGTERM")
      const timer = setTimeout(() => child.kill("SIGKILL"), 30_000)
      await exited
      clearTimeout(timer)
      log.end()
    }
  }
}

/** The caller's environment without any gateway, database or Redis settings. */
const cleanEnv = () => {
  const env: Record<string, string> = {}
  for (const [k, v] of Object.entries(process.env)) {
    if (v === undefined || k.startsWith("GATEWAY_") || k === "DATABASE_URL" || k === "REDIS_URL" || k === "PORT" || k === "HOST") continue
    env[k] = v
  }
  return { ...env, CI: "", NODE_ENV: "production" }
}

const spawnUpstream = (logDir: string) =>
  spawnPinned({ name: "upstream", args: [join(ROOT, "bench", "embedded-db.ts"), "--upstream"], ready: /upstream listening on (http:\/\/\S+)/, cpu: 1, logDir })

const runFlushProcess = (postgresUrl: string | undefined) =>
  new Promise<unknown>((resolve, reject) => {
    const args = [join(ROOT, "bench", "embedded-db.ts"), "--flush", `--rate=${rate}`, `--flushes=${values.flushes}`, `--prefill=${values.prefill}`, `--engine=${values.engine}`]
    const env = { ...cleanEnv(), ...extraEnv, ...(postgresUrl === undefined ? {} : { DATABASE_URL: postgresUrl }) }
    const child: ChildProcess = spawn(NODE, args, { cwd: ROOT, env, stdio: ["ignore", "pipe", "pipe"] })
    let out = ""
    child.stdout!.on("data", (d) => (out += d))
    child.stderr!.on("data", (d) => (out += d))
    child.once("spawn", () => pinThread(child.pid!, 0))
    child.once("exit", (code) => {
      const line = out.trim().split("\n").findLast((l) => l.startsWith("{"))
      if (code === 0 && line !== undefined) resolve(JSON.parse(line))
      else reject(new Error(`flush bench exited ${code}:\n${out}`))
    })
  })

const main = async () => {
  if (values.upstream) return serveUpstream()
  if (values.flush) return measureFlush()
  const logDir = mkdtempSync(join(tmpdir(), "bench-embedded-db-logs-"))
  const postgres = values.engine === "postgres" ? (await import("./lib/procs.ts")).freshDatabase(process.env.BENCH_POSTGRES_URL ?? "postgres://root@127.0.0.1:5432/postgres") : undefined
  console.log(`logs in ${logDir}; load average at start ${loadavg().map((l) => l.toFixed(2)).join(" ")}`)
  const upstream = await spawnUpstream(logDir)
  const gatewayRuns: GatewayRun[] = []
  const flushRuns: unknown[] = []
  try {
    for (let i = 0; i < runs; i++) {
      const run = await runGateway(logDir, upstream.url, postgres?.url)
      console.log(`run ${i + 1}: ${JSON.stringify(run)}  (load ${loadavg()[0]!.toFixed(2)})`)
      gatewayRuns.push(run)
      if (!values["skip-flush"]) {
        const flush = await runFlushProcess(postgres?.url)
        console.log(`flush ${i + 1}: ${JSON.stringify(flush)}`)
        flushRuns.push(flush)
      }
    }
  } finally {
    await stopAll()
    postgres?.drop()
  }
  const spread = (xs: number[]) => `${median(xs).toFixed(1)} (${Math.min(...xs).toFixed(1)}–${Math.max(...xs).toFixed(1)})`
  const col = (f: (r: GatewayRun) => number | undefined) => gatewayRuns.map(f).filter((x): x is number => x !== undefined)
  const summary = {
    engine: values.engine,
    env: extraEnv,
    runs,
    rate,
    firstStartMs: spread(col((r) => r.firstStartMs)),
    firstStartPeakMiB: spread(col((r) => r.firstStartPeakMiB)),
    startMs: spread(col((r) => r.startMs)),
    startPeakMiB: spread(col((r) => r.startPeakMiB)),
    idleRssMiB: spread(col((r) => r.idleRssMiB)),
    eldP99Us: spread(col((r) => r.load?.eldP99Us)),
    eldMaxUs: spread(col((r) => r.load?.eldMaxUs)),
    cpuUsPerRequest: spread(col((r) => r.load?.cpuUsPerRequest)),
    mainThreadCpuUsPerRequest: spread(col((r) => r.load?.mainThreadCpuUsPerRequest)),
    loadedRssMiB: spread(col((r) => r.load?.rssMiB)),
    hwmAfterLoadMiB: spread(col((r) => r.load?.hwmMiB)),
    stopMs: spread(col((r) => r.stopMs)),
    flushCpuUs: spread(flushRuns.map((f) => (f as { cpuUs: { p50: number } }).cpuUs.p50)),
    flushMaxStallUs: spread(flushRuns.map((f) => (f as { maxStallUs: { p50: number } }).maxStallUs.p50)),
    loadAverageAtEnd: loadavg()[0]
  }
  console.log("\nmedian (min–max) over runs:")
  console.log(JSON.stringify(summary, null, 2))
  if (values.json !== undefined) writeFileSync(values.json, JSON.stringify({ summary, gatewayRuns, flushRuns }, null, 2))
}

await main()
