/**
 * `npm run bench` — load benchmarks: gateway overhead next to direct calls and Portkey, queueing
 * under overload (one instance, then two on PostgreSQL + Redis), streams and memory, and the cost
 * of metering in process vs on Redis. See bench/README.md for the method.
 *
 *   npm run bench                  full run (~20–30 min on the 2-core machine)
 *   npm run bench -- --quick       smoke check (< 5 min)
 *   npm run bench -- --only=overhead,queueing,streams,soak   a subset
 *   npm run bench -- --only=artifacts   the artifacts upload/query benchmark (optional; also `node bench/artifacts.ts`)
 *   npm run bench -- --only=batches     a 1,000-request batch beside interactive traffic (optional; also `node bench/batches.ts`)
 *   npm run bench -- --runs=5      more runs per point (at least 3)
 *
 * Writes bench/results/<timestamp>.json, <timestamp>.md, <timestamp>-*.svg and latest.md.
 */
import { execFileSync } from "node:child_process"
import { appendFileSync, copyFileSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs"
import { cpus, freemem, loadavg, release, tmpdir, totalmem } from "node:os"
import { join } from "node:path"
import { parseArgs } from "node:util"
import { type ArtifactsResult, artifactsMarkdown, runArtifacts } from "./artifacts.ts"
import { type BatchesResult, batchesMarkdown, runBatches } from "./batches.ts"
import { affinity, pin, reachable, ROOT, serviceVersions, stopAll } from "./lib/procs.ts"
import { FULL, type Profile, QUICK } from "./lib/profile.ts"
import { writeReport } from "./lib/report.ts"
import { type OverheadResult, runOverhead } from "./suites/overhead.ts"
import { type QueueingResult, runQueueing } from "./suites/queueing.ts"
import { runSoak, type SoakResult } from "./suites/soak.ts"
import { runStreams, type StreamsResult } from "./suites/streams.ts"

const { values } = parseArgs({
  options: {
    quick: { type: "boolean", default: false },
    only: { type: "string" },
    runs: { type: "string" },
    out: { type: "string" },
    help: { type: "boolean", short: "h", default: false }
  }
})
if (values.help) {
  console.log(readFileSync(import.meta.filename, "utf8").split("*/")[0])
  process.exit(0)
}

const base: Profile = values.quick ? QUICK : FULL
const runs = values.runs === undefined ? base.runs : Math.max(3, Number(values.runs))
const profile: Profile = { ...base, runs }
const suites = new Set((values.only ?? "overhead,queueing,streams,soak").split(",").map((s) => s.trim()))
const outDir = values.out ?? join(ROOT, "bench", "results")
mkdirSync(outDir, { recursive: true })
const logDir = mkdtempSync(join(tmpdir(), "bench-logs-"))

const sh = (cmd: string, args: string[]) => {
  try {
    return execFileSync(cmd, args, { encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] }).trim()
  } catch {
    return null
  }
}
const pkgVersion = (name: string, from = ROOT) => {
  try {
    return JSON.parse(readFileSync(join(from, "node_modules", name, "package.json"), "utf8")).version as string
  } catch {
    return null
  }
}

// Machine facts before pinning (nproc reports the cores this process may use).
const cpuModel = /model name\s*:\s*(.+)/.exec(readFileSync("/proc/cpuinfo", "utf8"))?.[1]?.trim() ?? cpus()[0]?.model ?? "unknown"
const machine = {
  nproc: Number(sh("nproc", [])),
  cpuModel,
  memoryGiB: Math.round((totalmem() / 1024 ** 3) * 10) / 10,
  freeMemoryGiB: Math.round((freemem() / 1024 ** 3) * 10) / 10,
  kernel: release(),
  loadAverageAtStart: loadavg(),
  loadAverageAtEnd: [] as number[]
}

// The generator (this process) runs on core 1; every server under test on core 0.
pin(process.pid, 1)
const generatorAffinity = affinity(process.pid)

const postgresUrl = process.env.BENCH_POSTGRES_URL ?? "postgres://root@127.0.0.1:5432/postgres"
const redisUrl = process.env.BENCH_REDIS_URL ?? "redis://127.0.0.1:6379"
const services = { postgres: reachable("postgres", postgresUrl), redis: reachable("redis", redisUrl) }
const pkg = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8"))
const versions = {
  gateway: pkg.version as string,
  gitCommit: sh("git", ["-C", ROOT, "rev-parse", "HEAD"]),
  gitDirty: (sh("git", ["-C", ROOT, "status", "--porcelain", "--", "src", "machines"]) ?? "") !== "",
  node: process.version,
  portkey: pkgVersion("@portkey-ai/gateway"),
  honoNodeServer: pkgVersion("@hono/node-server"),
  undici: pkgVersion("undici"),
  effect: pkgVersion("effect"),
  ...serviceVersions(postgresUrl, redisUrl)
}

const started = new Date()
const stamp = started.toISOString().replace(/\..*$/, "Z").replace(/:/g, "-")
console.log(`bench ${profile.name}: ${profile.runs} runs per point; generator on core ${generatorAffinity}, servers on core 0; logs in ${logDir}`)
console.log(`machine: ${machine.nproc} cores (${machine.cpuModel}), load average ${machine.loadAverageAtStart.map((l) => l.toFixed(2)).join(" ")}`)
if (machine.loadAverageAtStart[0]! > 0.5) console.log("warning: the machine is not idle; figures will be noisy")

// A benchmark never runs unbounded: past this, everything it started is stopped.
const WATCHDOG_MS = (profile.name === "quick" ? 15 : 150) * 60_000
setTimeout(() => {
  console.error(`watchdog: still running after ${WATCHDOG_MS / 60_000} min, stopping`)
  void stopAll().finally(() => process.exit(2))
}, WATCHDOG_MS).unref()

let stopping = false
const onSignal = (signal: string) => {
  if (stopping) return
  stopping = true
  console.log(`${signal}: stopping the processes the benchmark started`)
  void stopAll().finally(() => process.exit(130))
}
process.on("SIGINT", () => onSignal("SIGINT"))
process.on("SIGTERM", () => onSignal("SIGTERM"))

const errors: string[] = []
const attempt = async <A>(name: string, f: () => Promise<A>): Promise<A | null> => {
  if (!suites.has(name)) return null
  const t = performance.now()
  try {
    const result = await f()
    console.log(`[${name}] done in ${((performance.now() - t) / 1000).toFixed(0)} s`)
    return result
  } catch (error) {
    const message = `${name} failed: ${(error as Error)?.stack ?? String(error)}`
    console.error(message)
    errors.push(message.split("\n").slice(0, 3).join(" "))
    await stopAll()
    return null
  }
}

const overhead: OverheadResult | null = await attempt("overhead", () => runOverhead(profile, logDir, { redis: services.redis }))
const queueing: QueueingResult | null = await attempt("queueing", () => {
  if (!services.postgres || !services.redis) console.log("[queueing] PostgreSQL or Redis unreachable: the two-instance setup will fail and be noted")
  return runQueueing(profile, logDir)
})
const streams: StreamsResult | null = await attempt("streams", () => runStreams(profile, logDir))
const soak: SoakResult | null = await attempt("soak", () => runSoak(profile, logDir))
const artifacts: ArtifactsResult | null = await attempt("artifacts", () => runArtifacts({ quick: profile.name === "quick" }, logDir))
const batches: BatchesResult | null = await attempt("batches", () => runBatches({ quick: profile.name === "quick" }, logDir))

machine.loadAverageAtEnd = loadavg()
const elapsedS = (Date.now() - started.getTime()) / 1000
const result = {
  kind: "svc-gateway load benchmark",
  profile: profile.name,
  startedAt: started.toISOString(),
  elapsedSeconds: Math.round(elapsedS),
  machine,
  pinning: { generator: generatorAffinity, serversUnderTest: "0", upstreamSimulator: "1 (with the generator)", postgresAndRedis: "unpinned (system services)" },
  versions,
  services,
  settings: profile,
  errors,
  overhead,
  queueing,
  streams,
  soak,
  artifacts,
  batches
}
const jsonFile = join(outDir, `${stamp}.json`)
// JSON has no NaN: a figure that could not be taken (no samples) is written as the string "NaN".
writeFileSync(jsonFile, `${JSON.stringify(result, (_k, v) => (typeof v === "number" && !Number.isFinite(v) ? String(v) : v), 1)}\n`)
const mdFile = writeReport(result, outDir, stamp)
if (artifacts !== null) appendFileSync(mdFile, `\n${artifactsMarkdown(artifacts)}`)
if (batches !== null) appendFileSync(mdFile, `\n${batchesMarkdown(batches)}`)
copyFileSync(mdFile, join(outDir, "latest.md"))
console.log(`\nwrote ${jsonFile}\n      ${mdFile}\n      ${join(outDir, "latest.md")}\nin ${elapsedS.toFixed(0)} s`)
await stopAll()
process.exit(errors.length === 0 ? 0 : 1)
