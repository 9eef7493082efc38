/**
 * Probes PostgreSQL and Redis once per test run. Suites that need a service read the result with
 * `inject("services")`. With CI=true a missing service fails the run; otherwise its suites are
 * skipped and this says so clearly. It also starts the gateways that suites share (see there).
 */
import { execFile } from "node:child_process"
import { mkdtempSync, rmSync } from "node:fs"
import { Socket } from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import type { TestProject } from "vitest/node"
import { monthOf } from "../../src/metering/month.ts"
import { closeAdminConnections, freshPostgresDatabase } from "./engines.ts"
import { startSharedGateways } from "./shared-gateway.ts"
import { RUN_TMPDIR_VARIABLE } from "./test-environment.ts"

export interface ServiceAvailability {
  readonly postgresUrl: string | null
  readonly redisUrl: string | null
}

declare module "vitest" {
  export interface ProvidedContext {
    services: ServiceAvailability
    /** An embedded data dir with every migration applied (no keys), or null: see `embeddedDataDir`. */
    migratedDataDir: string | null
    /** A PostgreSQL database with every migration applied (no keys), or null: see `migratedPostgresDatabase`. */
    migratedPostgresTemplate: string | null
  }
}

const POSTGRES_URL = process.env.TEST_DATABASE_URL ?? "postgres://root@127.0.0.1:5432/test"
const REDIS_URL = process.env.TEST_REDIS_URL ?? "redis://127.0.0.1:6379"

/** Sends one protocol message and resolves true if the server answers in the expected way. */
const probe = (url: string, hello: Buffer, expect: (reply: Buffer) => boolean) =>
  new Promise<boolean>((resolve) => {
    const { hostname, port } = new URL(url)
    const socket = new Socket()
    const done = (ok: boolean) => {
      socket.destroy()
      resolve(ok)
    }
    socket.setTimeout(2_000, () => done(false))
    socket.once("error", () => done(false))
    socket.once("data", (reply) => done(expect(reply)))
    socket.connect(Number(port), hostname, () => socket.write(hello))
  })

// PostgreSQL answers an SSLRequest with a single byte, 'S' or 'N'.
const sslRequest = Buffer.from([0, 0, 0, 8, 0x04, 0xd2, 0x16, 0x2f])

/**
 * `gateway migrate` on a new data dir, once per run: suites copy it instead of having every
 * embedded gateway unpack the template and migrate it again (~1 s of CPU per start). Null if the
 * command fails (suites then start from empty data dirs, as a user's first start does).
 */
const migratedDataDir = async () => {
  const dir = mkdtempSync(join(tmpdir(), "migrated-data-dir-"))
  const { DATABASE_URL: _, ...env } = process.env // the embedded engine's database, not a server's
  const failed = await gatewayMigrate({ ...env, GATEWAY_DATA_DIR: dir })
  if (failed === undefined) return dir
  console.warn(`\n⚠ could not prepare a migrated data dir (suites start from empty ones): ${failed}`)
  rmSync(dir, { recursive: true, force: true })
  return null
}

/** Runs `gateway migrate` with `env`; resolves with its stderr if it failed, undefined if it did not. */
const gatewayMigrate = (env: NodeJS.ProcessEnv) =>
  new Promise<string | undefined>((resolve) => {
    const main = join(import.meta.dirname, "..", "..", "src", "main.ts")
    execFile(process.execPath, [main, "migrate"], { env }, (error, _stdout, stderr) => resolve(error === null ? undefined : stderr))
  })

/**
 * The same for PostgreSQL: `gateway migrate` on a new database, once per run, which suites copy
 * with `CREATE DATABASE … TEMPLATE` (`migratedPostgresDatabase`). Null if that fails (suites then
 * start from empty databases). A template must have no connection while it is copied: only the
 * migrate command, which has exited, ever connects to it.
 */
const migratedPostgresTemplate = async (adminUrl: string) => {
  let db: Awaited<ReturnType<typeof freshPostgresDatabase>>
  try {
    db = await freshPostgresDatabase(adminUrl)
  } catch (error) {
    console.warn(`\n⚠ could not create a PostgreSQL template database (suites start from empty ones): ${String(error)}`)
    return null
  }
  const dir = mkdtempSync(join(tmpdir(), "migrate-postgres-"))
  const failed = await gatewayMigrate({ ...process.env, DATABASE_URL: db.url, GATEWAY_DATA_DIR: dir })
  rmSync(dir, { recursive: true, force: true })
  if (failed === undefined) return { name: new URL(db.url).pathname.slice(1), drop: db.drop }
  console.warn(`\n⚠ could not migrate a PostgreSQL template database (suites start from empty ones): ${failed}`)
  await db.drop()
  return null
}

/**
 * What every project's setup needs: the probes, the migrated data dir and the PostgreSQL template.
 * Vitest runs the global setup once per project (two here), in one process; preparing them once
 * saves two `gateway migrate` runs (~2 s of CPU at the start, when every core is busy).
 */
const prepare = async () => {
  await awayFromMonthEnd()
  const pgProbe = probe(POSTGRES_URL, sslRequest, (r) => r.length === 1 && (r[0] === 0x4e || r[0] === 0x53))
  const [pg, redis, migrated, template] = await Promise.all([
    pgProbe,
    probe(REDIS_URL, Buffer.from("PING\r\n"), (r) => r.toString().startsWith("+PONG")),
    migratedDataDir(),
    pgProbe.then((reachable) => (reachable ? migratedPostgresTemplate(POSTGRES_URL) : null))
  ])
  return { pg, redis, migrated, template }
}

/**
 * Allowances and usage are per calendar month (UTC), and many suites spend one key's allowance
 * and then check what is left, or read this month's usage. A run that straddles the month's end
 * sees a fresh month halfway. A clean-clone run near midnight on 30 November most likely failed
 * that way in two files: the Redis-loss waves found $0.047 "left" after spending $0.048 (the new
 * month's budget), and the dashboard read 0 as a key's usage (of the new month).
 * The gateway is right to start the new month; the tests assume one month. So a run that begins
 * within `MONTH_END_MARGIN_MS` of the month's end (longer than the slowest full run seen, ~8 min)
 * waits for the next month first, at most that long, and says so.
 */
const MONTH_END_MARGIN_MS = 15 * 60_000

const awayFromMonthEnd = async () => {
  const wait = monthOf(Date.now()).end - Date.now()
  if (wait > MONTH_END_MARGIN_MS) return
  console.warn(`\n⚠ the month ends in ${Math.ceil(wait / 1000)} s: waiting for it, so no suite sees two months\n`)
  await new Promise((resolve) => setTimeout(resolve, wait + 1_000))
}

/** The preparation shared by the projects' setups, and how many of them have not torn down yet. */
const shared: { prepared?: ReturnType<typeof prepare> | undefined; users: number; warned?: boolean } =
  ((globalThis as any)[Symbol.for("svc-gateway.test-setup")] ??= { users: 0 })

export default async function setup(project: TestProject) {
  shared.users++
  shared.prepared ??= prepare()
  const { pg, redis, migrated, template } = await shared.prepared
  /** The last project's teardown removes what the preparation made. */
  const release = async () => {
    if (--shared.users > 0) return
    await template?.drop()
    shared.prepared = undefined
  }
  project.provide("migratedDataDir", migrated)
  project.provide("migratedPostgresTemplate", template?.name ?? null)
  const missing = [!pg && `PostgreSQL (${POSTGRES_URL})`, !redis && `Redis (${REDIS_URL})`].filter(Boolean)
  if (missing.length > 0) {
    if (process.env.CI === "true") {
      throw new Error(`CI=true and these services are unreachable: ${missing.join(", ")}. Service-backed suites are required on CI.`)
    }
    if (!shared.warned) console.warn(`\n⚠ SKIPPING service-backed suites; unreachable: ${missing.join(", ")}. Embedded suites still run.\n`)
    shared.warned = true
  }
  project.provide("services", { postgresUrl: pg ? POSTGRES_URL : null, redisUrl: redis ? REDIS_URL : null })
  // Set up once (the root config's), for both projects: the latency project's file runs on the
  // same shared gateways once the suite's files are done with them.
  const gateways = await startSharedGateways({ postgresUrl: pg ? POSTGRES_URL : null, migratedDataDir: migrated, postgresTemplate: template?.name ?? null })
  project.provide("sharedGateways", gateways.addresses)
  // The run's temporary directory (on tmpfs when there is one): data dirs a test left behind go
  // with it, so they never accumulate in memory across runs.
  return async () => {
    await gateways.teardown()
    await release()
    await closeAdminConnections()
    const runDir = process.env[RUN_TMPDIR_VARIABLE]
    if (runDir !== undefined) rmSync(runDir, { recursive: true, force: true })
  }
}
