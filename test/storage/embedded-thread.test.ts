/**
 * The embedded database's thread started early (`serve` starts it before loading the gateway's
 * modules): the database layer adopts it and it opens the database with the layer's settings; a
 * layer on PostgreSQL ends it instead; without one the layer starts its own thread as before.
 */
import { Effect, Layer, Redacted } from "effect"
import { SqlClient } from "effect/sql"
import { rmSync } from "node:fs"
import { describe, expect, inject, it } from "vitest"
import { Settings } from "../../src/config/settings.ts"
import { DatabaseLive } from "../../src/storage/database.ts"
import { embeddedWorkers } from "../../src/storage/embedded-database.ts"
import { startEarlyThread, takeEarlyThread } from "../../src/storage/embedded-thread.ts"
import { embeddedDataDir, migratedPostgresDatabase } from "../support/engines.ts"

const withDatabase = <A, E>(settings: Partial<Parameters<typeof Settings.layerWith>[0]>, effect: Effect.Effect<A, E, SqlClient.SqlClient>) =>
  Effect.runPromise(Effect.provide(effect, DatabaseLive.pipe(Layer.provide(Settings.layerWith(settings)))))

const sharedBuffers = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const rows = yield* sql<{ shared_buffers: string }>`SHOW shared_buffers`
  return { setting: rows[0]!.shared_buffers, workers: embeddedWorkers().length }
})

describe("the embedded database's thread started early", () => {
  it("is adopted by the layer and opens the database with the layer's settings", async () => {
    const dir = embeddedDataDir()
    try {
      startEarlyThread()
      const seen = await withDatabase({ dataDir: dir, databaseUrl: undefined, embeddedSharedBuffersMb: 12 }, sharedBuffers)
      // The layer's setting reached Postgres through the `open` message, and one thread served it.
      expect(seen).toEqual({ setting: "12MB", workers: 1 })
      // Adopted: no thread is left waiting for a layer.
      expect(takeEarlyThread()).toBeUndefined()
    } finally {
      takeEarlyThread()?.terminate()
      rmSync(dir, { recursive: true, force: true })
    }
  }, 60_000)

  it("without one, the layer starts its own thread", async () => {
    const dir = embeddedDataDir()
    try {
      expect(takeEarlyThread()).toBeUndefined()
      const seen = await withDatabase({ dataDir: dir, databaseUrl: undefined, embeddedSharedBuffersMb: 10 }, sharedBuffers)
      expect(seen).toEqual({ setting: "10MB", workers: 1 })
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  }, 60_000)

  const { postgresUrl } = inject("services")
  it.skipIf(postgresUrl === null)("is ended by a layer on PostgreSQL, which has no use for it", async () => {
    const db = migratedPostgresDatabase(postgresUrl!)
    try {
      startEarlyThread()
      await withDatabase({ databaseUrl: Redacted.make(db.url) }, Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        yield* sql`SELECT 1`
      }))
      expect(takeEarlyThread()).toBeUndefined()
      expect(embeddedWorkers()).toHaveLength(0)
    } finally {
      takeEarlyThread()?.terminate()
      db.drop()
    }
  }, 60_000)
})
