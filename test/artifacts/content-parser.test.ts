/**
 * Who writes an upload's data: the event loop for a small content, the parse worker on its own
 * connections for one of its target's `minBytes` or more (`row-writer.ts`), so a large upload's
 * megabytes of statements are never encoded on the event loop. Both must store the same rows, and
 * a write that fails in the worker must come back as the SqlError it was (its SQLSTATE decides the
 * HTTP answer), and so must one into a stalled PostgreSQL, at the answer deadline the gateway's own
 * connections have. Real PostgreSQL and embedded PGlite (whose worker gets a connection of its own).
 */
import { Cause, Effect, Exit, Layer, ManagedRuntime, Redacted, Semaphore } from "effect"
import { setTimeout as sleep } from "node:timers/promises"
import { SqlClient } from "effect/sql"
import { rmSync } from "node:fs"
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest"
import { ArtifactsRepo } from "../../src/artifacts/artifacts-repo.ts"
import { INLINE_MAX_BYTES, openContentSession, writeTargetOf } from "../../src/artifacts/content-parser.ts"
import { makeParseWorkerPool, type ParseWorkerPool } from "../../src/artifacts/parse-worker-pool.ts"
import { WORKER_WRITES_MIN_BYTES, type WriteTarget } from "../../src/artifacts/worker-protocol.ts"
import { Settings } from "../../src/config/settings.ts"
import { DatabaseLive, StorageEngine } from "../../src/storage/database.ts"
import { sqlState } from "../../src/storage/sql-failures.ts"
import { embeddedDataDir, freshDataDir, migratedPostgresDatabase } from "../support/engines.ts"
import { startPostgresProxy } from "../support/postgres-proxy.ts"

const { postgresUrl } = inject("services")
const engines = [
  { name: "embedded", make: async () => ({ settings: { dataDir: embeddedDataDir(), databaseUrl: undefined }, drop: async () => {} }) },
  ...(postgresUrl === null ? [] : [{
    name: "postgres",
    make: async () => {
      const db = await migratedPostgresDatabase(postgresUrl)
      return { settings: { databaseUrl: Redacted.make(db.url), dataDir: freshDataDir() }, drop: db.drop }
    }
  }])
]

/** A CSV of `rows` rows: numbers (row keys), quoted text with commas, and numbers written as text with leading zeros. */
const makeCsv = (rows: number) => {
  const lines = ["id,name,price,zip"]
  for (let i = 0; i < rows; i++) lines.push(`${i},"item ${i}, Zürich",${(i * 7919) % 100_000 / 100},0${i % 9000}`)
  return lines.join("\n") + "\n"
}

/**
 * The size from which the worker writes, here: an eighth of the server's `WORKER_WRITES_MIN_BYTES`
 * (the same code runs either way; at the server's 1 MiB, writing 28,000 rows twice took ~9 s of
 * this file's 26 on the embedded engine). Still above `INLINE_MAX_BYTES`, so the contents just
 * below it are parsed by a worker too and written by the event loop.
 */
const WORKER_MIN_BYTES = WORKER_WRITES_MIN_BYTES / 8

/**
 * Rows for a content just over `WORKER_MIN_BYTES` (~150 KB; each test checks it is over). The
 * interrupted upload keeps 40,000 rows: its statements must still be running when it is stopped.
 */
const WORKER_ROWS = 4_000

for (const engine of engines) describe(`upload writes: event loop or parse worker (${engine.name})`, () => {
  let runtime: ManagedRuntime.ManagedRuntime<ArtifactsRepo | SqlClient.SqlClient | StorageEngine, unknown>
  let made: Awaited<ReturnType<typeof engine.make>>
  let target: () => WriteTarget | undefined
  beforeAll(async () => {
    made = await engine.make()
    runtime = ManagedRuntime.make(ArtifactsRepo.layer.pipe(Layer.provideMerge(DatabaseLive), Layer.provide(Settings.layerWith(made.settings))))
    // As the upload makes it (`Artifacts.layer`), with the file's smaller size for the worker's writes.
    const targetOf = writeTargetOf(await runtime.runPromise(Effect.service(StorageEngine)), made.settings.databaseUrl, 2, 10_000)
    target = () => {
      const connection = targetOf()
      return connection === undefined ? undefined : { ...connection, minBytes: WORKER_MIN_BYTES }
    }
  })
  afterAll(async () => {
    await runtime?.dispose()
    await made?.drop()
    rmSync(made.settings.dataDir, { recursive: true, force: true })
  })

  interface StoreOptions {
    readonly target: (() => WriteTarget | undefined) | undefined
    /** Reuses a content (to make a write fail). */
    readonly contentId?: string
    readonly batchBytes?: number
    readonly onPending?: (contentId: string) => void
    readonly signal?: AbortSignal
    readonly pool?: ParseWorkerPool
  }
  /** One upload through the session as `Artifacts.upload` drives it. */
  const storeExit = (body: string, options: StoreOptions) =>
    runtime.runPromiseExit(Effect.scoped(Effect.gen(function*() {
      const repo = yield* ArtifactsRepo
      const session = openContentSession(yield* Semaphore.make(1), options.target, options.pool)
      const bytes = Buffer.from(body)
      for (let at = 0; at < bytes.length; at += 64 * 1024) yield* session.write(bytes.subarray(at, at + 64 * 1024))
      const info = yield* session.finish()
      const parsed = yield* session.parse({ format: "csv" }, options.batchBytes ?? 64 * 1024)
      const contentId = options.contentId ?? (yield* repo.createPending("key_writes", info.sha256, info.sizeBytes, parsed.format, parsed.shape))
      options.onPending?.(contentId)
      if (parsed.writes === "worker") yield* session.store(contentId)
      else for (let piece = yield* session.next(); piece !== undefined; piece = yield* session.next()) yield* repo.insertPiece(contentId, piece)
      return { contentId, writes: parsed.writes }
    })), { signal: options.signal })
  const store = async (body: string, options: StoreOptions) => {
    const exit = await storeExit(body, options)
    if (Exit.isSuccess(exit)) return exit.value
    throw Cause.squash(exit.cause)
  }
  const rowCount = (contentId: string) =>
    runtime.runPromise(Effect.flatMap(SqlClient.SqlClient, (sql) => sql<{ n: number }>`SELECT count(*)::int4 AS n FROM artifact_rows WHERE content_id = ${contentId}::int8`))
      .then((rows) => rows[0].n)

  /** Everything stored for a content, as one digest per table (row numbers included). */
  const digest = (contentId: string) =>
    runtime.runPromise(Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const [rows] = yield* sql<{ n: string; d: string }>`SELECT count(*)::text AS n,
        md5(string_agg(row_no || ' ' || data::text || ' ' || coalesce(original::text, '-'), E'\n' ORDER BY row_no)) AS d
        FROM artifact_rows WHERE content_id = ${contentId}::int8`
      const [search] = yield* sql<{ d: string }>`SELECT md5(string_agg(row_no || ' ' || search || ' ' || coalesce(nums::text, '-'), E'\n' ORDER BY row_no)) AS d
        FROM artifact_row_search WHERE content_id = ${contentId}::int8`
      const [chunks] = yield* sql<{ d: string }>`SELECT md5(string_agg(bytes, ''::bytea ORDER BY chunk_no)) AS d
        FROM artifact_chunks WHERE content_id = ${contentId}::int8`
      return { rows: Number(rows.n), data: rows.d, search: search.d, chunks: chunks.d }
    }))

  it("a large content is written by its worker, row for row as the event loop writes it", async () => {
    const csv = makeCsv(WORKER_ROWS)
    expect(Buffer.byteLength(csv)).toBeGreaterThan(WORKER_MIN_BYTES)
    const body = JSON.stringify({ bytes: csv })
    const byWorker = await store(body, { target })
    const byLoop = await store(body, { target: undefined })
    expect([byWorker.writes, byLoop.writes]).toEqual(["worker", "main"])
    const [a, b] = [await digest(byWorker.contentId), await digest(byLoop.contentId)]
    expect(a.rows).toBe(WORKER_ROWS)
    expect(a).toEqual(b)
    // Below the size, the event loop writes even with a target (a worker parses it: it is over INLINE_MAX_BYTES).
    const below = makeCsv(2_000)
    expect(Buffer.byteLength(below)).toBeGreaterThan(INLINE_MAX_BYTES)
    expect(Buffer.byteLength(below)).toBeLessThan(WORKER_MIN_BYTES)
    expect((await store(JSON.stringify({ bytes: below }), { target })).writes).toBe("main")
  })

  it("a write that fails in the worker fails the upload with the server's SQLSTATE", async () => {
    const csv = makeCsv(WORKER_ROWS)
    expect(Buffer.byteLength(csv)).toBeGreaterThan(WORKER_MIN_BYTES)
    // Rows already stored under a content, by the event loop (a small content: storing a large
    // one first cost ~1 s of CPU per engine and proves nothing more); the worker's rows under that
    // same content start with the same row numbers: a primary-key violation, in the worker.
    const first = await store(JSON.stringify({ bytes: makeCsv(2_000) }), { target })
    expect(first.writes).toBe("main")
    const failed = await store(JSON.stringify({ bytes: csv }), { target, contentId: first.contentId }).then(() => undefined, (error: unknown) => error)
    expect(failed).toMatchObject({ _tag: "SqlError" })
    expect(sqlState(failed as never)).toBe("23505")
  })

  it("an interrupted upload cancels the worker's statements before it gives its content up", async () => {
    const stop = new AbortController()
    let contentId: string | undefined
    // Large batches: each statement runs long enough to be caught mid-way.
    const running = storeExit(JSON.stringify({ bytes: makeCsv(40_000) }), { target, batchBytes: 512 * 1024, onPending: (id) => (contentId = id), signal: stop.signal })
    while (contentId === undefined || (await rowCount(contentId)) === 0) await sleep(2)
    stop.abort()
    expect(Exit.hasInterrupts(await running)).toBe(true)
    // Nothing was left running: the count no longer moves.
    const after = await rowCount(contentId)
    expect(after).toBeLessThan(40_000)
    await sleep(300)
    expect(await rowCount(contentId)).toBe(after)
  })

  it.runIf(engine.name === "postgres")("a worker writing into a stalled database fails at the answer deadline", async () => {
    const url = Redacted.value(made.settings.databaseUrl!)
    const proxy = await startPostgresProxy(new URL(url))
    try {
      // The gateway's target, reaching the database through a proxy, with a 1 s answer deadline.
      const stalling = () => {
        const connection = target()
        return connection?.kind === "postgres" ? { ...connection, url: proxy.through(url), guards: { ...connection.guards, answerTimeout: 1_000 } } : undefined
      }
      let contentId: string | undefined
      // Large batches (as the interrupted upload's), so the write is still going when the proxy
      // freezes, once the worker's first rows are in (its connections are open by then).
      const running = storeExit(JSON.stringify({ bytes: makeCsv(40_000) }), {
        target: stalling, batchBytes: 512 * 1024, onPending: (id) => (contentId = id), signal: AbortSignal.timeout(30_000)
      })
      while (contentId === undefined || (await rowCount(contentId)) === 0) await sleep(2)
      proxy.freeze()
      const started = performance.now()
      const exit = await running
      expect(Exit.hasInterrupts(exit)).toBe(false)
      // (Across the worker's boundary the failure keeps its message and SQLSTATE, not its reason's
      // type; a SqlError without a data exception's or a limit's SQLSTATE is a 503.)
      const failure = Exit.isFailure(exit) ? Cause.squash(exit.cause) : undefined
      expect(failure).toMatchObject({ _tag: "SqlError" })
      expect(sqlState(failure as never)).toBeUndefined()
      expect((failure as Error).message).toMatch(/gave no answer within 1000 ms/)
      // The deadline (1 s), then the worker's cancellation of its other statement, whose cancel
      // request waits on a new connection into the stall (5 s): well before the 30 s abort.
      expect(performance.now() - started).toBeLessThan(15_000)
    } finally {
      proxy.thaw()
      await proxy.close()
    }
  })

  it.runIf(engine.name === "postgres")("a worker connects within the target's connect timeout, not the client's default 5 s", async () => {
    // The gateway gives its storage timeout (10 s by default) to a worker that connects while it
    // parses a large upload on the same thread; the client's own default (5 s) once failed a
    // 1.6 MB upload under a full test run with "Connection timed out". Here a database slow to
    // accept (1.5 s) fails a worker given 0.5 s and is waited out by one given 5 s.
    const url = Redacted.value(made.settings.databaseUrl!)
    const proxy = await startPostgresProxy(new URL(url))
    try {
      proxy.delayConnections(1_500)
      const through = (connectTimeoutMs: number) => () => {
        const connection = target()
        return connection?.kind === "postgres" ? { ...connection, url: proxy.through(url), connectTimeoutMs } : undefined
      }
      const body = JSON.stringify({ bytes: makeCsv(WORKER_ROWS) })
      // (With the client's default, the delay would be waited out and the upload stored.)
      const short = await storeExit(body, { target: through(500) })
      expect(Exit.isFailure(short) ? (Cause.squash(short.cause) as Error).message : "stored").toMatch(/Connection timed out/)
      const long = await store(body, { target: through(5_000) })
      expect(long.writes).toBe("worker")
      expect(await rowCount(long.contentId)).toBe(WORKER_ROWS)
    } finally {
      await proxy.close()
    }
  })

  it("a worker whose upload ended cleanly is kept and serves the next one; one whose write failed is not", async () => {
    const pool = makeParseWorkerPool({ max: 1, idleMs: 60_000 })
    const given: Array<number> = []
    const taken: Array<number> = []
    const watched: ParseWorkerPool = {
      take: () => {
        const worker = pool.take()
        if (worker !== undefined) taken.push(worker.threadId)
        return worker
      },
      give: (worker) => {
        given.push(worker.threadId)
        pool.give(worker)
      },
      close: pool.close
    }
    try {
      const csv = makeCsv(WORKER_ROWS)
      expect(Buffer.byteLength(csv)).toBeGreaterThan(WORKER_MIN_BYTES)
      const first = await store(JSON.stringify({ bytes: csv }), { target, pool: watched })
      expect(given).toHaveLength(1)
      // The same content again (its body differs), through the kept worker: the same rows.
      const body = JSON.stringify({ bytes: csv, summary: "again" })
      const second = await store(body, { target, pool: watched })
      expect(taken).toEqual([given[0]])
      expect(second.writes).toBe("worker")
      expect(await digest(second.contentId)).toEqual(await digest(first.contentId))
      expect(given).toEqual([given[0], given[0]])
      // A failed write: that worker is terminated, not kept.
      await expect(store(body, { target, pool: watched, contentId: second.contentId })).rejects.toMatchObject({ _tag: "SqlError" })
      expect(taken).toEqual([given[0], given[0]])
      expect(given).toHaveLength(2)
    } finally {
      await pool.close()
    }
  })
})
