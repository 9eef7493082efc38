/**
 * The storage engines a suite runs against: always the embedded one, PostgreSQL when reachable.
 * Each PostgreSQL suite gets a database of its own, dropped at the end, so suites never collide.
 */
import { PgClient } from "@effect/sql-pg"
import { randomBytes } from "node:crypto"
import { cpSync, mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Effect, ManagedRuntime, Redacted } from "effect"
import { SqlClient } from "effect/sql"
import { inject } from "vitest"
import type { Settings } from "../../src/config/settings.ts"

export interface Engine {
  readonly name: "embedded" | "postgres"
  /** Environment for a gateway process on this engine (a fresh database / data dir). */
  setup(): Promise<{ readonly env: Record<string, string>; cleanup(): Promise<void> }>
}

/**
 * One connection per test process and server for the statements that make and drop databases.
 * They ran as a `psql` process each (~130 a run: ~14 s of CPU in process starts), synchronously,
 * so the test worker's event loop, and every in-process gateway it hosts, stood still for each
 * (~0.2 s) while PostgreSQL copied a template.
 */
const adminConnections = new Map<string, ManagedRuntime.ManagedRuntime<SqlClient.SqlClient, unknown>>()

const admin = (adminUrl: string, statement: string): Promise<void> => {
  let runtime = adminConnections.get(adminUrl)
  if (runtime === undefined) {
    runtime = ManagedRuntime.make(PgClient.layer({ url: Redacted.make(adminUrl), maxConnections: 1, idleTimeout: "10 seconds", applicationName: "gateway tests: databases" }))
    adminConnections.set(adminUrl, runtime)
  }
  return runtime.runPromise(Effect.flatMap(SqlClient.SqlClient, (sql) => sql.unsafe(statement)).pipe(Effect.asVoid))
}

/** Closes this process's admin connections (the global setup's teardown: its process runs on). */
export const closeAdminConnections = async () => {
  const runtimes = [...adminConnections.values()]
  adminConnections.clear()
  await Promise.all(runtimes.map((runtime) => runtime.dispose()))
}

export const freshDataDir = () => mkdtempSync(join(tmpdir(), "gateway-test-"))

/**
 * A new embedded data dir whose database already has every migration (a copy of the one the
 * global setup made with `gateway migrate`; no keys, no admin token), so a gateway's first start
 * skips unpacking the template and migrating: ~1 s less CPU per start. What a first start does
 * on an empty dir is the subject of its own tests (storage/template, cli), which use `freshDataDir`.
 */
export const embeddedDataDir = () => {
  const dir = freshDataDir()
  const migrated = inject("migratedDataDir")
  if (migrated !== null) cpSync(migrated, dir, { recursive: true })
  return dir
}

/** The embedded engine alone, for a suite whose subject does not depend on the engine. */
export const embeddedEngine: Engine = {
  name: "embedded",
  async setup() {
    const dir = embeddedDataDir()
    return { env: { GATEWAY_DATA_DIR: dir }, cleanup: async () => rmSync(dir, { recursive: true, force: true }) }
  }
}

/**
 * A new PostgreSQL database, empty or a copy of `template`; returns its URL and a function that
 * drops it.
 */
export const freshPostgresDatabase = async (adminUrl: string, template?: string) => {
  const name = `gw_test_${randomBytes(6).toString("hex")}`
  await admin(adminUrl, `CREATE DATABASE ${name}${template === undefined ? "" : ` TEMPLATE ${template}`}`)
  const url = new URL(adminUrl)
  url.pathname = `/${name}`
  return {
    url: url.toString(),
    drop: async () => {
      try {
        await admin(adminUrl, `DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)
      } catch {
        // best effort: a leftover test database is harmless
      }
    }
  }
}

/**
 * A new PostgreSQL database with every migration applied: a copy (`CREATE DATABASE … TEMPLATE`) of
 * the one the global setup migrated with `gateway migrate`, as `embeddedDataDir` is for the
 * embedded engine. A gateway's first start on it skips migrating (1.5–5 s of wall time and ~0.5 s
 * of CPU here). Migrating an empty database stays tested: the global setup does it on every run,
 * and suites about it (two instances migrating at once) use `freshPostgresDatabase`.
 */
export const migratedPostgresDatabase = (adminUrl: string) => {
  const template = inject("migratedPostgresTemplate")
  return freshPostgresDatabase(adminUrl, template ?? undefined)
}

const postgres = (adminUrl: string): Engine => ({
  name: "postgres",
  async setup() {
    const db = await migratedPostgresDatabase(adminUrl)
    const dir = freshDataDir()
    return {
      env: { DATABASE_URL: db.url, GATEWAY_DATA_DIR: dir },
      cleanup: async () => {
        rmSync(dir, { recursive: true, force: true })
        await db.drop()
      }
    }
  }
})

/**
 * A test's options in a `describe.concurrent.each(engines())` suite: the engines' suites run at
 * the same time (each has its own gateway, database and keys, and most of their time is spent
 * waiting on the gateway), while the tests of one suite keep their order, as they depend on it.
 */
export const inOrder = { concurrent: false } as const

/** Engines available in this run (PostgreSQL only when the global setup reached it). */
export const engines = (): ReadonlyArray<Engine> => {
  const { postgresUrl } = inject("services")
  return postgresUrl === null ? [embeddedEngine] : [embeddedEngine, postgres(postgresUrl)]
}

/** An engine for a suite that builds the storage layers itself: the settings that open a new database on it. */
export interface StorageTarget {
  readonly name: Engine["name"]
  make(): Promise<{ readonly settings: Partial<Parameters<typeof Settings.layerWith>[0]>; cleanup(): Promise<void> }>
}

/** `engines()` for suites in the test's process: a migrated data dir, or a migrated PostgreSQL copy. */
export const storageTargets = (): ReadonlyArray<StorageTarget> => {
  const { postgresUrl } = inject("services")
  const embedded: StorageTarget = {
    name: "embedded",
    make: async () => {
      const dir = embeddedDataDir()
      return { settings: { dataDir: dir, databaseUrl: undefined }, cleanup: async () => rmSync(dir, { recursive: true, force: true }) }
    }
  }
  if (postgresUrl === null) return [embedded]
  return [embedded, {
    name: "postgres",
    make: async () => {
      const db = await migratedPostgresDatabase(postgresUrl)
      return { settings: { databaseUrl: Redacted.make(db.url) }, cleanup: db.drop }
    }
  }]
}
