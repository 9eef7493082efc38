/**
 * The embedded database in its worker thread, through the real layer (PGlite in a temp data dir):
 * statements leave the event loop free, a dead worker is answered with SqlError and replaced,
 * kill -9 loses no committed row, memory is capped, and a new data dir comes from the template.
 */
import { Effect, Layer, Schedule } from "effect"
import { SqlClient } from "effect/sql"
import { spawn } from "node:child_process"
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { inspect } from "node:util"
import { describe, expect, it } from "vitest"
import { Settings } from "../../src/config/settings.ts"
import { DatabaseLive } from "../../src/storage/database.ts"
import { embeddedWorkers, pgliteCompileCount } from "../../src/storage/embedded-database.ts"
import { embeddedDataDir, freshDataDir } from "../support/engines.ts"
import { exposedGc } from "../support/gc.ts"

const withDatabase = <A, E>(dataDir: string, effect: Effect.Effect<A, E, SqlClient.SqlClient>, settings: Partial<Parameters<typeof Settings.layerWith>[0]> = {}) =>
  Effect.runPromise(Effect.provide(effect, DatabaseLive.pipe(Layer.provide(Settings.layerWith({ dataDir, databaseUrl: undefined, ...settings })))))

/** Postgres' pg_control `state`: 1 after a clean shutdown, 6 while in production (or after a crash). */
const controlState = (dataDir: string) => readFileSync(join(dataDir, "pglite", "global", "pg_control")).readUInt32LE(16)
const SHUT_DOWN = 1
const IN_PRODUCTION = 6

/**
 * A data dir for one test: a copy of the run's migrated one where the data dir's making is not the
 * subject (~1 s less CPU each), a fresh one (unpacked from the template on first open) where it is.
 */
const inTempDir = async (test: (dir: string) => Promise<void>, make: () => string = embeddedDataDir) => {
  const dir = make()
  try {
    await test(dir)
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
}

describe("embedded database (worker thread)", () => {
  it("runs a long statement while the event loop keeps turning", () =>
    inTempDir(async (dir) => {
      const { took, longestGap } = await withDatabase(dir, Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        yield* sql`SELECT 1`
        let longestGap = 0
        let last = performance.now()
        const timer = setInterval(() => {
          const now = performance.now()
          longestGap = Math.max(longestGap, now - last)
          last = now
        }, 5)
        const start = performance.now()
        // PGlite's pg_sleep spins in WASM (it has nothing else to wait on): 600 ms of the database
        // thread's CPU, as long on any machine. (A count over generate_series(1, 4000000) did the
        // same in 1.8 s of CPU here, 2026-12-01; alone on the event loop's thread, either blocks it.)
        // Long enough that the worker's own pauses on a loaded 2-core VM stay well under a third of
        // it: with 300 ms, a clean clone's full run saw a 129 ms gap against a bound of 120
        // (2026-12-04; a blocked loop's gap is the whole statement).
        yield* sql`SELECT pg_sleep(0.6)`
        const took = performance.now() - start
        clearInterval(timer)
        return { took, longestGap }
      }))
      // On the event loop's thread the statement would block it for its whole duration.
      expect(took).toBeGreaterThan(100)
      expect(longestGap).toBeLessThan(Math.max(60, took / 3))
    }), 90_000)

  it("answers statements on a dead worker with SqlError, then a new worker serves every committed row", () =>
    inTempDir(async (dir) => {
      await withDatabase(dir, Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        yield* sql`CREATE TABLE survivors (id int PRIMARY KEY)`
        for (let id = 1; id <= 40; id++) yield* sql`INSERT INTO survivors VALUES (${id})`
        const workers = embeddedWorkers()
        expect(workers).toHaveLength(1)
        const compiles = pgliteCompileCount()
        yield* Effect.promise(() => workers[0]!.terminate())

        const right_after = yield* sql`SELECT count(*) FROM survivors`.pipe(Effect.timeout("10 seconds"), Effect.flip)
        expect(right_after._tag).toBe("SqlError")

        const rows = yield* sql<{ n: number }>`SELECT count(*)::int AS n FROM survivors`.pipe(
          Effect.retry(Schedule.spaced("200 millis").pipe(Schedule.upTo({ times: 150 })))
        )
        expect(rows[0]!.n).toBe(40)
        expect(embeddedWorkers()).toHaveLength(1)
        expect(embeddedWorkers()[0]).not.toBe(workers[0])
        // The new worker was given the WASM module the first one compiled, and did not compile it.
        expect(pgliteCompileCount()).toBe(compiles)
        yield* sql`INSERT INTO survivors VALUES (41)`
      }))
      // Closed cleanly afterwards: the data dir reopens with everything.
      const n = await withDatabase(dir, Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        return (yield* sql<{ n: number }>`SELECT count(*)::int AS n FROM survivors`)[0]!.n
      }))
      expect(n).toBe(41)
      // The layer's close stopped the worker cleanly: Postgres wrote its shutdown checkpoint.
      expect(controlState(dir)).toBe(SHUT_DOWN)
    }, freshDataDir), 120_000)

  it("lets the compiled WASM module go once no database is open: a full collection frees it", () =>
    inTempDir(async (dir) => {
      const count = () => withDatabase(dir, Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        return (yield* sql<{ n: number }>`SELECT count(*)::int AS n FROM pg_class`)[0]!.n
      }))
      await count()
      const compiles = pgliteCompileCount()
      const gc = exposedGc()
      await new Promise((resolve) => setImmediate(resolve)) // a WeakRef's target is kept until the job ends
      gc()
      expect(await count()).toBeGreaterThan(0)
      // Held strongly after the close, the module would have survived and been given to this thread.
      // (No other database is open in this process now: a test worker runs one file at a time, and
      // every suite closes what it opens.)
      expect(pgliteCompileCount()).toBe(compiles + 1)
    }), 90_000)

  it("keeps every committed row when the process is killed with SIGKILL, and the next process takes the lock over", () =>
    inTempDir(async (dir) => {
      const child = spawn(process.execPath, [join(import.meta.dirname, "support", "commit-forever.ts"), dir], { stdio: ["ignore", "pipe", "pipe"] })
      let output = ""
      child.stderr.on("data", (d) => (output += d))
      let lastCommitted = 0
      await new Promise<void>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`no commits in time:\n${output}`)), 60_000)
        child.stdout.on("data", (d: Buffer) => {
          output += d
          const ids = [...String(d).matchAll(/committed (\d+)/g)].map((m) => Number(m[1]))
          if (ids.length > 0) lastCommitted = Math.max(lastCommitted, ...ids)
          if (lastCommitted >= 150) {
            clearTimeout(timer)
            resolve()
          }
        })
        child.once("exit", (code) => reject(new Error(`exited with ${code}:\n${output}`)))
      })
      child.kill("SIGKILL")
      await new Promise((resolve) => child.once("exit", resolve))
      // The killed process's lock file is left behind; its pid is dead, so it is taken over.
      expect(existsSync(join(dir, "gateway.lock"))).toBe(true)
      expect(controlState(dir)).toBe(IN_PRODUCTION)
      const rows = await withDatabase(dir, Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        return yield* sql<{ id: number; note: string }>`SELECT id, note FROM crash_rows ORDER BY id`
      }))
      expect(rows.length).toBeGreaterThanOrEqual(lastCommitted)
      expect(rows.slice(0, lastCommitted)).toEqual(Array.from({ length: lastCommitted }, (_, i) => ({ id: i + 1, note: `row ${i + 1}` })))
    }, freshDataDir), 120_000)

  it("fails a statement that needs more than the memory cap with out of memory, and goes on", () =>
    inTempDir(async (dir) => {
      const { embeddedClient } = await import("../../src/storage/embedded-database.ts")
      const { PgClient } = await import("@effect/sql-pg")
      const layer = PgClient.layerFrom(embeddedClient({ dataDir: dir, sharedBuffersMb: 8, maxWasmMemoryMb: 192 }))
      await Effect.runPromise(Effect.provide(Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        expect((yield* sql<{ n: number }>`SELECT length(repeat('x', 10000000)) AS n`)[0]!.n).toBe(10_000_000)
        const error = yield* sql`SELECT length(repeat('x', 150000000))`.pipe(Effect.flip)
        expect(error._tag).toBe("SqlError")
        expect(inspect(error, { depth: 6 })).toMatch(/out of memory/)
        expect((yield* sql<{ one: number }>`SELECT 1 AS one`)[0]!.one).toBe(1)
      }), layer))
    }), 90_000)

  it("refuses a data dir whose database directory holds something else, naming it", () =>
    inTempDir(async (dir) => {
      mkdirSync(join(dir, "pglite"))
      writeFileSync(join(dir, "pglite", "notes.txt"), "not a database")
      const error = await withDatabase(dir, Effect.flip(Effect.andThen(SqlClient.SqlClient, (sql) => sql`SELECT 1`)))
        .catch((defect: unknown) => defect)
      expect(String((error as { message?: string }).message ?? error)).toMatch(/pglite is not an embedded database/)
      expect(readFileSync(join(dir, "pglite", "notes.txt"), "utf8")).toBe("not a database")
    }, freshDataDir), 60_000)
})
