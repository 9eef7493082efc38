/**
 * `npm run fuzz` — the fuzz soak: the generator of `test/fuzz/hostile-requests.ts` against real
 * gateways for a while, with a new seed per batch, on the embedded engine and (when reachable) on
 * PostgreSQL. Prints what it tried, the statuses, every distinct failure and the slowest bystander.
 *
 *   npm run fuzz -- --minutes 10             10 minutes, split between the engines
 *   npm run fuzz -- --engine embedded        one engine (embedded | postgres | both)
 *   npm run fuzz -- --huge-mb 24 --seed 7    larger huge strings; a fixed first seed
 *   npm run fuzz -- --sweep                  the deterministic sweep first (every route × class)
 *   npm run fuzz -- --out report.json        also write the report as JSON
 *   npm run fuzz -- --upstream --minutes 10  the other side instead: what a hostile upstream answers
 *                                            (test/fuzz/hostile-upstream.test.ts, both engines, a
 *                                            case count sized to the minutes; --seed fixes its seed)
 *
 * PostgreSQL: TEST_DATABASE_URL (default postgres://root@127.0.0.1:5432/test); a database of its
 * own is created and dropped. Exits non-zero when any case failed.
 */
import { execFileSync, spawnSync } from "node:child_process"
import { randomBytes } from "node:crypto"
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { parseArgs } from "node:util"
import { fastConfigEnv } from "../test/support/fast-config.ts"
import { startGateway } from "../test/support/gateway-process.ts"
import { startBystander } from "./lib/bystander.ts"
import { emptyReport, fiveXX, type FuzzOptions, type FuzzReport, prepareTarget, randomCases, runCases, sweepCases } from "../test/fuzz/hostile-requests.ts"

const { values } = parseArgs({
  options: {
    minutes: { type: "string", default: "10" },
    engine: { type: "string", default: "both" },
    "huge-mb": { type: "string", default: "8" },
    seed: { type: "string" },
    batch: { type: "string", default: "200" },
    sweep: { type: "boolean", default: false },
    out: { type: "string" },
    upstream: { type: "boolean", default: false },
    help: { type: "boolean", short: "h", default: false }
  }
})
if (values.help) {
  console.log(readFileSync(import.meta.filename, "utf8").split("*/")[0])
  process.exit(0)
}

if (values.upstream) {
  // The suite's own property over more cases: ~22 ms a case on the embedded engine and ~33 on
  // PostgreSQL (half as many there) on a 2-core machine, with start-up: ~40 ms of the minutes per case.
  const runs = Math.max(50, Math.round((Number(values.minutes) * 60_000) / 40))
  const upstreamSeed = values.seed ?? String(randomBytes(4).readUInt32BE())
  console.log(`upstream side: ${runs} cases on the embedded engine and ${Math.ceil(runs / 2)} on PostgreSQL, seed ${upstreamSeed}`)
  const vitest = join(import.meta.dirname, "..", "node_modules", ".bin", "vitest")
  const result = spawnSync(vitest, ["run", "test/fuzz/hostile-upstream.test.ts"], {
    cwd: join(import.meta.dirname, ".."),
    stdio: "inherit",
    env: { ...process.env, FUZZ_SEED: upstreamSeed, FUZZ_UPSTREAM_RUNS: String(runs) }
  })
  process.exit(result.status ?? 1)
}

const POSTGRES_URL = process.env.TEST_DATABASE_URL ?? "postgres://root@127.0.0.1:5432/test"
const options: FuzzOptions = { hugeBytes: Math.floor(Number(values["huge-mb"]) * 1024 * 1024), hangMs: 30_000 }
const batch = Math.max(1, Number(values.batch))
let seed = values.seed === undefined ? randomBytes(4).readUInt32BE() : Number(values.seed)

const postgresReachable = () => {
  try {
    execFileSync("psql", [POSTGRES_URL, "-qAtc", "SELECT 1"], { stdio: "pipe" })
    return true
  } catch {
    return false
  }
}

const engineNames = values.engine === "both" ? (postgresReachable() ? ["embedded", "postgres"] : ["embedded"]) : [values.engine!]

/** A gateway on a fresh data dir (and database), and how to tear it down. */
const startOn = async (engine: string) => {
  const dir = mkdtempSync(join(tmpdir(), "gateway-fuzz-"))
  const env: Record<string, string> = { GATEWAY_DATA_DIR: dir, ...fastConfigEnv(dir) }
  let drop = () => {}
  if (engine === "postgres") {
    const name = `gw_fuzz_${randomBytes(6).toString("hex")}`
    execFileSync("psql", [POSTGRES_URL, "-qc", `CREATE DATABASE ${name}`], { stdio: "pipe" })
    const url = new URL(POSTGRES_URL)
    url.pathname = `/${name}`
    env.DATABASE_URL = url.toString()
    drop = () => execFileSync("psql", [POSTGRES_URL, "-qc", `DROP DATABASE IF EXISTS ${name} WITH (FORCE)`], { stdio: "pipe" })
  }
  const gw = await startGateway(env)
  return {
    gw,
    stop: async () => {
      if (gw.child.exitCode === null) gw.child.kill("SIGKILL") // a frozen gateway cannot stop gracefully
      await gw.stop()
      drop()
      rmSync(dir, { recursive: true, force: true })
    }
  }
}

/** Failures grouped by what went wrong (numbers and ids stripped), with one example each. */
const grouped = (report: FuzzReport) => {
  const groups = new Map<string, { count: number; example: string }>()
  for (const failure of report.failures) {
    for (const problem of failure.problems) {
      const signature = problem.replace(/req_[0-9a-f]+/g, "req_…").replace(/\d+/g, "N").slice(0, 160)
      const group = groups.get(signature) ?? { count: 0, example: failure.label }
      group.count++
      groups.set(signature, group)
    }
  }
  return [...groups.entries()].sort((a, b) => b[1].count - a[1].count)
}

/**
 * The slowest answer a bystander in a thread of its own got, per engine, and in which batch. The
 * cases' own bystander (in `runCases`) runs on this process's main thread, which also builds the
 * cases' bodies of megabytes: its figure counts this process's turns (60–1,270 ms seen) as the
 * gateway's. This one measures the gateway.
 */
const threadBystander: Record<string, { ms: number; batch: string }> = {}

const soak = async (engine: string, untilMs: number) => {
  const report = emptyReport()
  let started = await startOn(engine)
  let target = await prepareTarget(started.gw)
  let bystander = startBystander(started.gw.baseUrl, 10)
  const worst = (threadBystander[engine] = { ms: 0, batch: "" })
  const note = async (batchName: string) => {
    const seen = await bystander.collect()
    if (seen.worst > worst.ms) Object.assign(worst, { ms: Math.round(seen.worst), batch: batchName })
  }
  try {
    if (values.sweep) {
      await runCases(target, sweepCases(target, options), options, report)
      await note("the sweep")
    }
    while (Date.now() < untilMs) {
      const before = report.tried
      await runCases(target, randomCases(target, { ...options, seed, numRuns: batch }), options, report)
      await note(`seed ${seed}`)
      console.log(`[${engine}] seed ${seed}: ${report.tried - before} cases, ${report.tried} in all, ${fiveXX(report)} 5xx, ${report.failures.length} failing`)
      seed++
      if (report.frozeOn !== undefined || report.serverDied) {
        console.log(`[${engine}] the server ${report.serverDied ? "exited" : "stopped answering"} on: ${report.frozeOn ?? report.failures.at(-1)?.label}; restarting it`)
        report.frozeOn = undefined
        report.serverDied = false
        await bystander.stop()
        await started.stop()
        started = await startOn(engine)
        target = await prepareTarget(started.gw)
        bystander = startBystander(started.gw.baseUrl, 10)
      }
    }
  } finally {
    await bystander.stop()
    await started.stop()
  }
  return report
}

const minutes = Number(values.minutes)
const results: Record<string, FuzzReport> = {}
const startedAt = Date.now()
for (const [i, engine] of engineNames.entries()) {
  const share = (minutes * 60_000 - (Date.now() - startedAt)) / (engineNames.length - i)
  results[engine] = await soak(engine, Date.now() + share)
}

let failed = false
for (const [engine, report] of Object.entries(results)) {
  console.log(`\n== ${engine}: ${report.tried} requests; statuses ${JSON.stringify(report.byStatus)}; ${fiveXX(report)} with status >= 500`)
  console.log(`   slowest bystander GET /v1/models: ${report.worstBystander.ms} ms, beside: ${report.worstBystander.label} (from this process's main thread, which builds the cases: its own turns count)`)
  const thread = threadBystander[engine]
  if (thread !== undefined) console.log(`   slowest answer to a bystander in a thread of its own (every 10 ms): ${thread.ms} ms, in ${thread.batch}`)
  for (const [signature, { count, example }] of grouped(report)) console.log(`   ${count}× ${signature}\n      e.g. ${example}`)
  failed ||= report.failures.length > 0
}
if (values.out !== undefined) writeFileSync(values.out, JSON.stringify(results, null, 2))
process.exit(failed ? 1 : 0)
