/**
 * Real layers for metering suites: a migrated database (a copy of the run's migrated embedded data
 * dir, or of its migrated PostgreSQL template when reachable: see `embeddedDataDir`), dropped when the layer closes, and the coordination stores.
 */
import { Effect, Layer, ManagedRuntime, Redacted } from "effect"
import type { SqlClient } from "effect/sql"
import { rmSync } from "node:fs"
import { afterAll, inject } from "vitest"
import { Settings } from "../../src/config/settings.ts"
import { Coordination } from "../../src/coordination/coordination.ts"
import { DatabaseLive } from "../../src/storage/database.ts"
import { embeddedDataDir, migratedPostgresDatabase } from "../support/engines.ts"
import { redisLayer } from "../coordination/support.ts"

export interface Database {
  readonly name: "embedded" | "postgres"
  readonly layer: () => Layer.Layer<SqlClient.SqlClient, unknown>
}

const embedded: Database = {
  name: "embedded",
  layer: () => {
    const dir = embeddedDataDir()
    return Layer.unwrap(Effect.acquireRelease(
      Effect.succeed(DatabaseLive.pipe(Layer.provide(Settings.layerWith({ dataDir: dir, databaseUrl: undefined, redisUrl: undefined })))),
      () => Effect.sync(() => rmSync(dir, { recursive: true, force: true }))
    ))
  }
}

const postgres = (adminUrl: string): Database => ({
  name: "postgres",
  layer: () =>
    Layer.unwrap(Effect.acquireRelease(
      Effect.promise(() => migratedPostgresDatabase(adminUrl)),
      (db) => Effect.promise(db.drop)
    ).pipe(Effect.map((db) =>
      DatabaseLive.pipe(Layer.provide(Settings.layerWith({ databaseUrl: Redacted.make(db.url), redisUrl: undefined })))
    )))
})

export const databases = (): ReadonlyArray<Database> => {
  const { postgresUrl } = inject("services")
  return postgresUrl === null ? [embedded] : [embedded, postgres(postgresUrl)]
}

/**
 * One embedded database for every `layer()` block of a test file (call it at the file's top
 * level): it opens with the first block that uses it and closes after the file's last test. An
 * open and close costs ~0.65 s of CPU here (PGlite's worker and Postgres's start), and a metering
 * file had up to five blocks. The blocks stay apart by their keys (every test makes new ones), as
 * keys are apart in a running gateway; each test still builds its own services on top.
 */
export const embeddedDatabasePerFile = (): Database => {
  let runtime: ManagedRuntime.ManagedRuntime<SqlClient.SqlClient, unknown> | undefined
  afterAll(async () => {
    await runtime?.dispose()
  })
  return {
    name: "embedded",
    layer: () =>
      Layer.unwrap(Effect.promise(async () => {
        runtime ??= ManagedRuntime.make(embedded.layer())
        return Layer.succeedContext(await runtime.context())
      }))
  }
}

export interface StoreKind {
  readonly name: "in-process" | "redis"
  /** A fresh, empty store (Redis: under a key prefix of its own). */
  readonly layer: () => Layer.Layer<Coordination>
}

export const storeKinds = (): ReadonlyArray<StoreKind> => {
  const { redisUrl } = inject("services")
  const inProcess: StoreKind = { name: "in-process", layer: () => Coordination.layerInProcess }
  if (redisUrl === null) return [inProcess]
  return [inProcess, { name: "redis", layer: () => redisLayer(redisUrl) }]
}

/**
 * Runs `attempt` every 50 ms until its result is a success, for at most 10 s, and returns the last
 * result: waits for a Redis TTL to lapse instead of sleeping "long enough" past it.
 */
export const untilSuccess = <T extends { readonly _tag: string }, E, R>(attempt: Effect.Effect<T, E, R>) =>
  Effect.gen(function*() {
    const deadline = Date.now() + 10_000
    let result = yield* attempt
    while (result._tag !== "Success" && Date.now() < deadline) {
      yield* Effect.sleep(50)
      result = yield* attempt
    }
    return result
  })
