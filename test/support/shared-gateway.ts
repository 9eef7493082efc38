/**
 * One gateway process per storage engine for the whole run, on the plain `fastConfig()`, for the
 * suites that only send requests to a gateway (dialects, SDK clients, embeddings…): a start costs
 * ~1.5 s of CPU and ~2.5 s of wall time on this 2-core machine, and ~25 suites × 2 engines used to
 * start their own identical one. The global setup starts them (`startSharedGateways`); a suite
 * takes one with `sharedGateway(engine)` and gets a key of its own, so suites stay independent:
 * what a suite reads is scoped to its keys. Suites about starting, stopping, restarting, the
 * process's output or a config of their own keep starting their own gateway (`startGateway`).
 */
import { cpSync, rmSync } from "node:fs"
import { inject } from "vitest"
import { freshDataDir, freshPostgresDatabase } from "./engines.ts"
import { fastConfigEnv } from "./fast-config.ts"
import { adminCaller, type GatewayProcess, startGateway } from "./gateway-process.ts"

/** What the global setup hands the suites: where each engine's shared gateway listens. */
export type SharedGatewayAddresses = Partial<Record<"embedded" | "postgres", { readonly baseUrl: string; readonly adminToken: string }>>

declare module "vitest" {
  export interface ProvidedContext {
    sharedGateways: SharedGatewayAddresses
  }
}

/** A suite's view of a shared gateway: its address, the admin API, and the suite's own key. */
export interface SharedGateway {
  readonly baseUrl: string
  /** A key made for this suite (the shared gateway's first key belongs to nobody). */
  readonly apiKey: string
  readonly adminToken: string
  admin(method: string, path: string, body?: unknown): Promise<Response>
}

/** Starts the shared gateways (embedded always, PostgreSQL when reachable); returns their addresses and a teardown. */
export const startSharedGateways = async (options: { readonly postgresUrl: string | null; readonly migratedDataDir: string | null; readonly postgresTemplate: string | null }) => {
  const started: Array<GatewayProcess> = []
  const cleanups: Array<() => void | Promise<void>> = []
  const start = async (env: Record<string, string>, dir: string) => {
    const gw = await startGateway({ ...env, GATEWAY_DATA_DIR: dir, ...fastConfigEnv(dir) })
    started.push(gw)
    return { baseUrl: gw.baseUrl, adminToken: gw.adminToken }
  }
  const embeddedDir = freshDataDir()
  cleanups.push(() => rmSync(embeddedDir, { recursive: true, force: true }))
  if (options.migratedDataDir !== null) cpSync(options.migratedDataDir, embeddedDir, { recursive: true })
  const postgres = options.postgresUrl === null ? undefined : await freshPostgresDatabase(options.postgresUrl, options.postgresTemplate ?? undefined)
  const postgresDir = freshDataDir()
  cleanups.push(() => rmSync(postgresDir, { recursive: true, force: true }))
  if (postgres !== undefined) cleanups.push(postgres.drop)
  const teardown = async () => {
    await Promise.all(started.map((gw) => gw.stop()))
    for (const cleanup of cleanups) await cleanup()
  }
  try {
    const [embedded, onPostgres] = await Promise.all([
      start({}, embeddedDir),
      postgres === undefined ? undefined : start({ DATABASE_URL: postgres.url }, postgresDir)
    ])
    const addresses: SharedGatewayAddresses = onPostgres === undefined ? { embedded } : { embedded, postgres: onPostgres }
    return { addresses, teardown }
  } catch (error) {
    await teardown()
    throw error
  }
}

let suites = 0

/** The run's shared gateway on this engine, with a new key for the calling suite (call it in `beforeAll`). */
export const sharedGateway = async (engine: { readonly name: "embedded" | "postgres" }): Promise<SharedGateway> => {
  const address = inject("sharedGateways")[engine.name]
  if (address === undefined) throw new Error(`no shared gateway on ${engine.name} (the global setup did not start one)`)
  const { baseUrl, adminToken } = address
  const admin = adminCaller(baseUrl, adminToken)
  // Named like the key a fresh gateway prints first ("default"), plus which suite made it.
  const res = await admin("POST", "/admin/v1/keys", { name: `default (suite ${++suites} of worker ${process.env.VITEST_POOL_ID ?? "?"})` })
  if (res.status !== 201) throw new Error(`could not create a key on the shared gateway: ${res.status} ${await res.text()}`)
  const { key } = (await res.json()) as { key: string }
  return { baseUrl, apiKey: key, adminToken, admin }
}
