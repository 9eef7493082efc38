/**
 * Storage failures stay typed failures and map to the right status (issue #10.6, #10.8):
 * - a connection lost inside `withTransaction` is a `SqlError` failure (a 503), not a defect (500);
 * - a data exception (SQLSTATE class 22) is the client's input: 400, never a retryable 503.
 * On a real PostgreSQL (whose backends we can terminate), through the gateway's own database layer
 * and over HTTP with the real server.
 */
import { type ChildProcess, execFileSync, spawn } from "node:child_process"
import { describe, expect, it } from "@effect/vitest"
import { Cause, Effect, Exit, Layer, Redacted } from "effect"
import { SqlClient } from "effect/sql"
import { rmSync } from "node:fs"
import { afterAll, beforeAll, inject } from "vitest"
import { Settings } from "../../src/config/settings.ts"
import { storageFailure } from "../../src/http/app.ts"
import { DatabaseLive } from "../../src/storage/database.ts"
import { isDataException, sqlState } from "../../src/storage/sql-failures.ts"
import { freshDataDir, migratedPostgresDatabase } from "../support/engines.ts"
import type { GatewayHandle } from "../support/gateway-process.ts"
import { startInProcessGateway } from "../support/in-process-gateway.ts"

const { postgresUrl } = inject("services")

const terminate = (url: string, where: string) =>
  execFileSync("psql", [url, "-qAtc", `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE ${where}`]).toString().trim()

describe.skipIf(postgresUrl === null)("storage failures on PostgreSQL", () => {
  const withDatabase = <A, E>(effect: (url: string) => Effect.Effect<A, E, SqlClient.SqlClient>) =>
    Effect.acquireUseRelease(
      Effect.promise(() => migratedPostgresDatabase(postgresUrl!)),
      (db) => effect(db.url).pipe(Effect.provide(DatabaseLive.pipe(Layer.provide(Settings.layerWith({ databaseUrl: Redacted.make(db.url), redisUrl: undefined }))))),
      (db) => Effect.promise(db.drop)
    )

  it.live("a connection lost inside withTransaction fails with SqlError instead of dying", () =>
    withDatabase((url) =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const exit = yield* Effect.exit(sql.withTransaction(Effect.gen(function*() {
          const [{ pid }] = yield* sql<{ pid: number }>`SELECT pg_backend_pid() AS pid`
          terminate(url, `pid = ${pid}`)
          yield* Effect.sleep("100 millis")
          return yield* sql`SELECT 1`
        })))
        expect(Exit.isFailure(exit)).toBe(true)
        if (Exit.isFailure(exit)) {
          expect(Cause.hasDies(exit.cause), Cause.pretty(exit.cause)).toBe(false)
          const failure = Cause.findErrorOption(exit.cause)
          expect(failure._tag === "Some" && (failure.value as { _tag?: string })._tag).toBe("SqlError")
        }
        // The pool recovers: the next transaction runs on a fresh connection.
        expect(yield* sql.withTransaction(sql<{ one: number }>`SELECT 1 AS one`)).toEqual([{ one: 1 }])
      })
    ), 30_000)

  it.live("SQLSTATE class 22 is the client's input (400); an outage is a 503", () =>
    withDatabase(() =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        for (const bad of [sql`SELECT ${"a\u0000b"}::text`, sql`SELECT ${'"\\ud800"'}::jsonb`, sql`SELECT ${"1e400"}::numeric::float8`]) {
          const error = yield* Effect.flip(bad)
          expect(sqlState(error)).toMatch(/^22/)
          expect(isDataException(error)).toBe(true)
          const mapped = yield* Effect.flip(storageFailure(error))
          expect(mapped._tag).toBe("InvalidRequest")
        }
        const [{ pid }] = yield* sql<{ pid: number }>`SELECT pg_backend_pid() AS pid`
        const lost = yield* Effect.flip(sql.withTransaction(Effect.gen(function*() {
          yield* sql`SELECT pg_terminate_backend(${pid})`
          return yield* sql`SELECT 1`
        })))
        expect(isDataException(lost)).toBe(false)
        const mapped = yield* Effect.flip(storageFailure(lost))
        expect(mapped).toMatchObject({ _tag: "ServiceUnavailable", status: 503 })
      })
    ), 30_000)
})

describe.skipIf(postgresUrl === null)("a connection lost inside a request's transaction (HTTP)", () => {
  let gw: GatewayHandle
  let db: Awaited<ReturnType<typeof migratedPostgresDatabase>>
  const dir = freshDataDir()
  let locker: ChildProcess | undefined
  beforeAll(async () => {
    db = await migratedPostgresDatabase(postgresUrl!)
    gw = await startInProcessGateway({ GATEWAY_DATA_DIR: dir, DATABASE_URL: db.url })
  })
  afterAll(async () => {
    locker?.kill()
    await gw?.stop()
    await db?.drop()
    rmSync(dir, { recursive: true, force: true })
  })

  it("answers 503 api_error in the flat shape, not 500", async () => {
    const headers = { authorization: `Bearer ${gw.apiKey}`, "content-type": "application/json" }
    const created = await (await fetch(`${gw.baseUrl}/v1/states`, { method: "POST", headers, body: '{"value":1}' })).json() as any
    const id = created.state.stateId as string
    // Hold the state's row lock from another session, so the append waits inside its transaction.
    locker = spawn("psql", [db.url, "-q"], { stdio: ["pipe", "pipe", "pipe"] })
    const locked = new Promise<void>((resolve) => locker!.stdout!.on("data", (d) => String(d).includes("locked") && resolve()))
    locker.stdin!.write(`BEGIN; SELECT 1 FROM states WHERE id = '${id}' FOR UPDATE;\n\\echo locked\n`)
    await locked
    const append = fetch(`${gw.baseUrl}/v1/states/${id}:append`, { method: "POST", headers, body: '{"delta":1}' })
    // Wait until the gateway's append is blocked on the lock, then kill its connection.
    let killed = "0"
    for (let i = 0; i < 100 && killed === "0"; i++) {
      await new Promise((r) => setTimeout(r, 50))
      killed = terminate(db.url, `datname = current_database() AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()`)
    }
    expect(killed).toBe("1")
    const res = await append
    const body = await res.json() as any
    expect(res.status, JSON.stringify(body)).toBe(503)
    expect(body).toEqual({ error: { type: "api_error", message: expect.any(String) } })
    expect(res.headers.get("retry-after")).toBe("1")
    locker.stdin!.end("ROLLBACK;\n")
    // Nothing was lost and the gateway recovers without a restart.
    const after = await fetch(`${gw.baseUrl}/v1/states/${id}:append`, { method: "POST", headers, body: '{"delta":1}' })
    expect(after.status).toBe(200)
    expect(((await after.json()) as any).state).toMatchObject({ seq: 1, value: 2 })
  }, 60_000)
})
