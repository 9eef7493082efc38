/**
 * What opening the embedded database costs a process that opens it again: a restart after its
 * thread died, or the next database of a process that opens many (a test worker). `--opens` times,
 * one after another in this process, a copy of a migrated data dir is opened (`embeddedClient`),
 * answers one statement and is closed; each open's CPU (the whole process: the database's thread
 * and V8's helpers included) and wall time are printed, and the mean of all but the first.
 * Then, once every database is closed: RSS after three full collections, and whether the next open
 * had to compile PGlite's WASM again (it should: the compiled module is only held while a database
 * is open). Run with `--expose-gc` for that part. Node's compile cache is on, as in `gateway serve`.
 *
 *   node --expose-gc bench/embedded-opens.ts [--opens=6]   (TMPDIR=/dev/shm leaves the disk out)
 */
import { Effect } from "effect"
import * as Reactivity from "effect/reactivity/Reactivity"
import { execFileSync } from "node:child_process"
import { cpSync, mkdtempSync, readFileSync, rmSync } from "node:fs"
import { enableCompileCache } from "node:module"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { parseArgs } from "node:util"
import { embeddedClient, pgliteCompileCount } from "../src/storage/embedded-database.ts"
import { NODE, ROOT } from "./lib/procs.ts"

// As `gateway serve` does (src/main.ts), so the database threads load PGlite's code from Node's cache.
const compileCache = enableCompileCache()
if (compileCache.directory !== undefined) process.env.NODE_COMPILE_CACHE ??= compileCache.directory

const { values } = parseArgs({ options: { opens: { type: "string", default: "6" } } })
const opens = Number(values.opens)
const work = mkdtempSync(join(tmpdir(), "embedded-opens-"))
const migrated = join(work, "migrated")
execFileSync(NODE, [join(ROOT, "src", "main.ts"), "migrate"], { env: { ...process.env, GATEWAY_DATA_DIR: migrated }, stdio: "ignore" })

/** Opens a fresh copy of the migrated data dir, runs one statement, closes it; its CPU and wall time, ms. */
const openOnce = async (n: number) => {
  const dir = join(work, `open-${n}`)
  cpSync(migrated, dir, { recursive: true })
  const cpu = process.cpuUsage()
  const startedAt = performance.now()
  await Effect.runPromise(Effect.scoped(Effect.gen(function*() {
    const sql = yield* embeddedClient({ dataDir: dir, sharedBuffersMb: 16 })
    yield* sql`SELECT 1`
  })).pipe(Effect.provide(Reactivity.layer)))
  const used = process.cpuUsage(cpu)
  return { cpuMs: (used.user + used.system) / 1000, wallMs: performance.now() - startedAt }
}

const results: Array<{ readonly cpuMs: number; readonly wallMs: number }> = []
for (let n = 0; n < opens; n++) {
  const result = await openOnce(n)
  results.push(result)
  console.log(`open ${n + 1}: ${result.cpuMs.toFixed(0)} ms CPU, ${result.wallMs.toFixed(0)} ms wall`)
}
const later = results.slice(1)
const mean = (pick: (r: (typeof results)[number]) => number) => (later.reduce((sum, r) => sum + pick(r), 0) / later.length).toFixed(0)
console.log(`opens 2–${opens}: mean ${mean((r) => r.cpuMs)} ms CPU, ${mean((r) => r.wallMs)} ms wall; PGlite compiled ${pgliteCompileCount()} time(s)`)

const gc = (globalThis as { gc?: () => void }).gc
if (gc !== undefined) {
  for (let i = 0; i < 3; i++) {
    await new Promise((resolve) => setTimeout(resolve, 200)) // a WeakRef's target is kept until the job ends
    gc()
  }
  const rssMiB = Number(/VmRSS:\s+(\d+)/.exec(readFileSync("/proc/self/status", "utf8"))![1]) / 1024
  const compiled = pgliteCompileCount()
  await openOnce(opens)
  console.log(`every database closed, three full collections: RSS ${rssMiB.toFixed(0)} MiB; the next open compiled again: ${pgliteCompileCount() > compiled}`)
}
rmSync(work, { recursive: true, force: true })
