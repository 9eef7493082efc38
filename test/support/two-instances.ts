/**
 * Two gateway processes on one new, migrated PostgreSQL database (a copy of the run's template: two
 * instances migrating one empty database at once is runtime-http/two-instances.test.ts's subject)
 * and a private Redis prefix, started in the suite's `beforeAll` and stopped (and cleaned up) in
 * its `afterAll`: the setup of every takeover and cross-instance suite.
 */
import { randomBytes } from "node:crypto"
import { rmSync } from "node:fs"
import { afterAll, beforeAll } from "vitest"
import { freshDataDir, migratedPostgresDatabase } from "./engines.ts"
import { type GatewayProcess, startGateway } from "./gateway-process.ts"

export interface TwoInstances {
  readonly a: GatewayProcess
  readonly b: GatewayProcess
  /** The database both use (for a test that explains a failure with what SQL holds). */
  readonly databaseUrl: string
  /** Their Redis key prefix. */
  readonly redisPrefix: string
}

export const twoInstances = (
  services: { readonly postgresUrl: string; readonly redisUrl: string },
  name: string,
  envFor: (dataDir: string) => Record<string, string>
): TwoInstances => {
  let a: GatewayProcess | undefined
  let b: GatewayProcess | undefined
  let drop: (() => void) | undefined
  let databaseUrl: string | undefined
  const redisPrefix = `${name}-${randomBytes(4).toString("hex")}:`
  const dirs = [freshDataDir(), freshDataDir()]
  beforeAll(async () => {
    const db = await migratedPostgresDatabase(services.postgresUrl)
    drop = db.drop
    databaseUrl = db.url
    const shared = {
      DATABASE_URL: db.url,
      REDIS_URL: services.redisUrl,
      GATEWAY_REDIS_PREFIX: redisPrefix,
      GATEWAY_ADMIN_TOKEN: `svcadm_${name.replaceAll("-", "_")}_test_token`
    }
    // Started together (each checks the migrations; the migrator locks its table).
    ;[a, b] = await Promise.all([
      startGateway({ ...shared, GATEWAY_DATA_DIR: dirs[0], ...envFor(dirs[0]) }),
      startGateway({ ...shared, GATEWAY_DATA_DIR: dirs[1], ...envFor(dirs[1]) })
    ])
    // The instance that made the database's first key printed it; suites call it A (they use
    // `a.apiKey`). The two are otherwise alike.
    if (a.apiKey === undefined && b.apiKey !== undefined) [a, b] = [b, a]
  })
  afterAll(async () => {
    for (const instance of [a, b]) {
      // A test may have frozen an instance (SIGSTOP) to make it lose its lease.
      if (instance?.child.exitCode === null) instance.child.kill("SIGCONT")
      await instance?.stop()
    }
    drop?.()
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true })
  })
  return {
    get a() {
      if (a === undefined) throw new Error("instance A has not started")
      return a
    },
    get b() {
      if (b === undefined) throw new Error("instance B has not started")
      return b
    },
    get databaseUrl() {
      if (databaseUrl === undefined) throw new Error("the instances have not started")
      return databaseUrl
    },
    redisPrefix
  }
}
