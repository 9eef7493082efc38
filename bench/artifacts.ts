/**
 * Artifacts benchmark: upload rate and query latency on a 100,000-row CSV, on PostgreSQL and the
 * embedded engine, next to the same query in plain TypeScript on the raw CSV.
 *
 *   node bench/artifacts.ts            3 uploads and 200 queries per engine
 *   node bench/artifacts.ts --quick    1 upload and 30 queries per engine (smoke check)
 *   npm run bench -- --only=artifacts  the same, as a section of the load benchmark
 *
 * The gateway runs pinned to core 0, this process (the client and the TypeScript baseline) on
 * core 1. Upload rate = rows / wall time of `POST /v1/artifacts` (body sent, parsed, stored).
 * While one upload runs, a bystander calls `GET /v1/models` every 10 ms: its worst latency shows
 * how long the upload held the gateway's event loop. That is wall time, which a busy machine
 * stretches (the gateway's threads share core 0); the gateway also runs with bench/lib/loop-probe.ts,
 * which reports for the same upload the longest stretch of main-thread CPU between two ticks of a
 * 2 ms timer (the longest task the event loop ran, which load cannot inflate) and its GC pauses.
 * Writes bench/results/artifacts-<stamp>.json and artifacts-latest.md.
 */
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs"
import { loadavg, tmpdir } from "node:os"
import { join } from "node:path"
import { parseArgs } from "node:util"
import { type ParsedTable, parseContent } from "../src/artifacts/parse-content.ts"
import { checkQuery, type RowQuery } from "../src/artifacts/query-input.ts"
import { evaluate } from "../src/artifacts/query-reference.ts"
import { defaultConfig } from "../src/config/default-config.ts"
import { freshDatabase, LOOP_PROBE, type LoopDelay, pin, reachable, ROOT, startGateway, stopAll } from "./lib/procs.ts"
import { type Distribution, distribution, median } from "./lib/stats.ts"

export interface ArtifactsOptions {
  readonly quick: boolean
  readonly rows?: number
}

const CITIES = ["Oslo", "Paris", "New York, NY", "Zürich", "São Paulo", "Tōkyō", "Lagos", "Lima"]

/** The CSV: quoted fields with commas, decimals, integers, dates; `variant` changes one cell so uploads never dedupe. */
export const makeCsv = (rows: number, variant: number) => {
  const lines = ["id,name,price,qty,city,created"]
  for (let i = 0; i < rows; i++) {
    const city = CITIES[i % CITIES.length]
    lines.push(`${i},item ${i},${((i * 7919) % 100_000) / 100},${i % 97},${city.includes(",") ? `"${city}"` : city},2026-${String(1 + (i % 12)).padStart(2, "0")}-${String(1 + (i % 28)).padStart(2, "0")}`)
  }
  lines[1] = lines[1].replace("item 0", `item 0 v${variant}`)
  return lines.join("\n") + "\n"
}

/** The measured query: a filter, a sort on another column, a page of 20. */
export const MAIN_QUERY = { filter: [{ field: "qty", op: "gt", value: 50 }], sort: [{ field: "price", dir: "desc" }], limit: 20 }
const OTHER_QUERIES: Record<string, unknown> = {
  "eq lookup": { filter: [{ field: "id", op: "eq", value: 77_777 }] },
  "search + limit 20": { search: "york", limit: 20 },
  "first page, no filter": { limit: 20 }
}

const time = async <A>(f: () => Promise<A>) => {
  const t = performance.now()
  const value = await f()
  return { value, ms: performance.now() - t }
}

interface EngineResult {
  readonly engine: "embedded" | "postgres"
  readonly uploadRowsPerSecond: ReadonlyArray<number>
  readonly uploadRowsPerSecondMedian: number
  readonly bystanderDuringUploadMs: Distribution
  /** The gateway's main thread during the watched upload (loop-probe.ts); undefined if it did not answer. */
  readonly eventLoopDuringUpload: EventLoopReport | undefined
  readonly query: Distribution
  readonly otherQueries: Record<string, Distribution>
  readonly totalMatched: number
}

interface EventLoopReport {
  /** Worst timer delay (wall time: includes waiting for a core). */
  readonly maxDelayMs: number
  /** Longest main-thread CPU stretch between two 2 ms ticks. */
  readonly longestTaskCpuMs: number | undefined
  /** GC pauses on the main thread, by kind. */
  readonly gc: Record<string, { readonly count: number; readonly maxMs: number }>
}

const eventLoopReport = (report: LoopDelay | undefined): EventLoopReport | undefined => {
  if (report === undefined) return undefined
  const gc = (report as LoopDelay & { gc?: Record<string, { count: number; maxMs: number }> }).gc ?? {}
  return {
    maxDelayMs: report.max / 1000,
    longestTaskCpuMs: report.cpuMax === undefined ? undefined : report.cpuMax / 1000,
    gc: Object.fromEntries(Object.entries(gc).map(([kind, p]) => [kind, { count: p.count, maxMs: p.maxMs }]))
  }
}

const measureEngine = async (engine: "embedded" | "postgres", csvs: ReadonlyArray<string>, rows: number, queries: number, logDir: string, adminUrl: string): Promise<EngineResult> => {
  const db = engine === "postgres" ? freshDatabase(adminUrl) : undefined
  const gw = await startGateway({
    name: `artifacts-${engine}`,
    config: defaultConfig,
    adminToken: `bench-${Date.now()}`,
    logDir,
    cpu: 0,
    nodeArgs: LOOP_PROBE,
    env: { BENCH_PROBE_CPU_MS: "2", ...(db === undefined ? {} : { DATABASE_URL: db.url }) }
  })
  try {
    const key = await gw.createKey("bench", "pro")
    const post = async (path: string, body: unknown) => {
      const res = await fetch(`${gw.url}${path}`, {
        method: "POST",
        headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
        body: typeof body === "string" ? body : JSON.stringify(body)
      })
      const text = await res.text()
      if (res.status >= 300) throw new Error(`${path} → ${res.status} ${text.slice(0, 300)}`)
      return JSON.parse(text)
    }

    const rates: Array<number> = []
    const bystander: Array<number> = []
    let eventLoop: EventLoopReport | undefined
    let artifactId = ""
    for (const [i, csv] of csvs.entries()) {
      const body = JSON.stringify({ bytes: csv, mimeType: "text/csv" })
      let uploading = true
      // The bystander watches the first upload only.
      const watcher = i > 0 ? Promise.resolve() : (async () => {
        while (uploading) {
          const { ms } = await time(() => fetch(`${gw.url}/v1/models`).then((r) => r.arrayBuffer()))
          bystander.push(ms)
          await new Promise((r) => setTimeout(r, 10))
        }
      })()
      if (i === 0) await gw.loopDelay() // starts the probe's window here
      const { value, ms } = await time(() => post("/v1/artifacts", body))
      uploading = false
      await watcher
      if (i === 0) eventLoop = eventLoopReport(await gw.loopDelay())
      artifactId = value.reference.artifactId
      rates.push(rows / (ms / 1000))
      console.log(`[artifacts] ${engine}: upload ${i + 1}: ${(ms / 1000).toFixed(2)} s, ${Math.round(rows / (ms / 1000))} rows/s`)
    }

    const latencies = async (body: unknown, n: number) => {
      for (let i = 0; i < Math.min(5, n); i++) await post(`/v1/artifacts/${artifactId}/query`, body)
      const samples: Array<number> = []
      let last: any
      for (let i = 0; i < n; i++) {
        const { value, ms } = await time(() => post(`/v1/artifacts/${artifactId}/query`, body))
        samples.push(ms)
        last = value
      }
      return { samples, last }
    }
    const main = await latencies(MAIN_QUERY, queries)
    const other: Record<string, Distribution> = {}
    for (const [name, body] of Object.entries(OTHER_QUERIES)) other[name] = distribution((await latencies(body, Math.ceil(queries / 2))).samples)
    return {
      engine,
      uploadRowsPerSecond: rates.map(Math.round),
      uploadRowsPerSecondMedian: Math.round(median(rates)),
      bystanderDuringUploadMs: distribution(bystander),
      eventLoopDuringUpload: eventLoop,
      query: distribution(main.samples),
      otherQueries: other,
      totalMatched: main.last.result.totalMatched
    }
  } finally {
    await gw.stop()
    db?.drop()
  }
}

/** The same query in plain TypeScript: parse the raw CSV (same parser, same typing), evaluate. */
const measureTypeScript = (csv: string, queries: number) => {
  const parse = () => parseContent(csv, Buffer.byteLength(csv), { format: "csv" }) as ParsedTable
  const table = parse()
  const checked = checkQuery(MAIN_QUERY, { structured: true, columns: table.shape.columns })
  if (!checked.ok) throw new Error(checked.message)
  const query = checked.value as RowQuery
  const parseSamples: Array<number> = []
  const querySamples: Array<number> = []
  let totalMatched = 0
  for (let i = 0; i < queries; i++) {
    let t = performance.now()
    const parsed = i < Math.min(queries, 10) ? parse() : table
    if (i < Math.min(queries, 10)) parseSamples.push(performance.now() - t)
    t = performance.now()
    totalMatched = evaluate(parsed.rows, query).totalMatched
    querySamples.push(performance.now() - t)
  }
  return { parseCsvMs: distribution(parseSamples), queryOnParsedRowsMs: distribution(querySamples), totalMatched }
}

export const runArtifacts = async (options: ArtifactsOptions, logDir: string) => {
  const rows = options.rows ?? 100_000
  const uploads = options.quick ? 1 : 3
  const queries = options.quick ? 30 : 200
  const csvs = Array.from({ length: uploads }, (_, i) => makeCsv(rows, i))
  const adminUrl = process.env.BENCH_POSTGRES_URL ?? "postgres://root@127.0.0.1:5432/postgres"
  const engines: Array<"embedded" | "postgres"> = reachable("postgres", adminUrl) ? ["postgres", "embedded"] : ["embedded"]
  const results: Array<EngineResult> = []
  for (const engine of engines) results.push(await measureEngine(engine, csvs, rows, queries, logDir, adminUrl))
  const typescript = measureTypeScript(csvs[0], queries)
  return {
    rows,
    csvBytes: Buffer.byteLength(csvs[0]),
    query: MAIN_QUERY,
    uploads,
    queriesPerEngine: queries,
    engines: results,
    typescript,
    postgresReachable: engines.includes("postgres")
  }
}

export type ArtifactsResult = Awaited<ReturnType<typeof runArtifacts>>

const f = (n: number) => (Number.isFinite(n) ? (n >= 100 ? n.toFixed(0) : n.toFixed(1)) : "–")

const loopCell = (e: EventLoopReport | undefined) =>
  e === undefined
    ? "–"
    : `${e.longestTaskCpuMs === undefined ? "–" : f(e.longestTaskCpuMs)} / ${f(e.maxDelayMs)} / ${e.gc.major?.count ?? 0}${e.gc.major === undefined ? "" : ` (max ${f(e.gc.major.maxMs)} ms)`}`

export const artifactsMarkdown = (r: ArtifactsResult) => {
  const lines = [
    `### Artifacts: ${r.rows.toLocaleString("en")}-row CSV (${(r.csvBytes / 1024 / 1024).toFixed(1)} MiB)`,
    "",
    `Query: \`${JSON.stringify(r.query)}\` (${r.engines[0]?.totalMatched.toLocaleString("en")} rows match). ${r.uploads} upload(s), ${r.queriesPerEngine} queries per engine.`,
    "",
    "| | upload rows/s (median) | query p50 ms | query p99 ms | bystander max ms during upload | event loop during upload: longest task (CPU ms) / worst delay ms / major GCs |",
    "|---|---|---|---|---|---|",
    ...r.engines.map((e) => `| ${e.engine} | ${e.uploadRowsPerSecondMedian.toLocaleString("en")} | ${f(e.query.p50)} | ${f(e.query.p99)} | ${f(e.bystanderDuringUploadMs.max)} | ${loopCell(e.eventLoopDuringUpload)} |`),
    `| plain TypeScript, query on parsed rows | – | ${f(r.typescript.queryOnParsedRowsMs.p50)} | ${f(r.typescript.queryOnParsedRowsMs.p99)} | – | – |`,
    `| plain TypeScript, parse the raw CSV + query | ${Math.round(r.rows / (r.typescript.parseCsvMs.p50 / 1000)).toLocaleString("en")} (parse only) | ${f(r.typescript.parseCsvMs.p50 + r.typescript.queryOnParsedRowsMs.p50)} | – | – | – |`,
    "",
    "| other queries, p50 / p99 ms | " + r.engines.map((e) => e.engine).join(" | ") + " |",
    "|---|" + r.engines.map(() => "---|").join(""),
    ...Object.keys(r.engines[0]?.otherQueries ?? {}).map((name) => `| ${name} | ${r.engines.map((e) => `${f(e.otherQueries[name].p50)} / ${f(e.otherQueries[name].p99)}`).join(" | ")} |`),
    ""
  ]
  if (!r.postgresReachable) lines.push("PostgreSQL was not reachable: embedded only.", "")
  return lines.join("\n")
}

if (process.argv[1] === import.meta.filename) {
  const { values } = parseArgs({ options: { quick: { type: "boolean", default: false }, rows: { type: "string" } } })
  pin(process.pid, 1)
  const logDir = mkdtempSync(join(tmpdir(), "bench-artifacts-"))
  console.log(`artifacts bench${values.quick ? " (quick)" : ""}; load average ${loadavg().map((l) => l.toFixed(2)).join(" ")}; logs in ${logDir}`)
  try {
    const result = await runArtifacts({ quick: values.quick, ...(values.rows === undefined ? {} : { rows: Number(values.rows) }) }, logDir)
    const outDir = join(ROOT, "bench", "results")
    mkdirSync(outDir, { recursive: true })
    const stamp = new Date().toISOString().replace(/\..*$/, "Z").replace(/:/g, "-")
    const md = artifactsMarkdown(result)
    writeFileSync(join(outDir, `artifacts-${stamp}.json`), `${JSON.stringify({ ...result, loadAverage: loadavg(), quick: values.quick }, null, 1)}\n`)
    writeFileSync(join(outDir, "artifacts-latest.md"), `${md}\nLoad average at the end: ${loadavg().map((l) => l.toFixed(2)).join(" ")}${values.quick ? " (quick run)" : ""}.\n`)
    console.log(`\n${md}`)
  } finally {
    await stopAll()
  }
}
