/**
 * The embedded database's thread started early (`serve` starts it before loading the gateway's
 * modules): the database layer adopts it and it opens the database with the layer's settings; a
 * layer on PostgreSQL ends it instead; without one the layer starts its own thread as before.
 * `serve` may also have it open the database before the layer exists (`openEarly`): the layer
 * adopts it open when its settings are the same, and replaces it when they are not.
 */
import { Effect, Layer, Redacted } from "effect"
import { SqlClient } from "effect/sql"
import { rmSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import type { Worker } from "node:worker_threads"
import { describe, expect, inject, it } from "vitest"
import { Settings } from "../../src/config/settings.ts"
import { DatabaseLive } from "../../src/storage/database.ts"
import { embeddedWorkers, openEarly } from "../../src/storage/embedded-database.ts"
import { startEarlyThread, takeEarlyThread } from "../../src/storage/embedded-thread.ts"
import { embeddedDataDir, freshDataDir, migratedPostgresDatabase } from "../support/engines.ts"

const withDatabase = <A, E>(settings: Partial<Parameters<typeof Settings.layerWith>[0]>, effect: Effect.Effect<A, E, SqlClient.SqlClient>) =>
  Effect.runPromise(Effect.provide(effect, DatabaseLive.pipe(Layer.provide(Settings.layerWith(settings)))))

const sharedBuffers = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const rows = yield* sql<{ shared_buffers: string }>`SHOW shared_buffers`
  return { setting: rows[0]!.shared_buffers, workers: embeddedWorkers().length }
})

/** The same, and whether the thread serving is `thread`. */
const servedBy = (thread: Worker) => Effect.map(sharedBuffers, (seen) => ({ ...seen, adopted: embeddedWorkers().includes(thread) }))

/** Resolves when the thread answers `ready` (a listener of the test's own, beside the module's). */
const readyOf = (thread: Worker) =>
  new Promise<void>((resolve, reject) => {
    thread.on("message", (message: { type: string }) => (message.type === "ready" ? resolve() : undefined))
    thread.once("exit", (code) => reject(new Error(`the thread exited with code ${code}`)))
  })

const exitOf = (thread: Worker) => new Promise<number>((resolve) => thread.once("exit", resolve))

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
      takeEarlyThread()?.worker.terminate()
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

  it("opened early with the layer's settings, is adopted open, even once it has answered", async () => {
    const dir = embeddedDataDir()
    try {
      const thread = startEarlyThread()
      const ready = readyOf(thread)
      expect(openEarly({ dataDir: dir, sharedBuffersMb: 12 })).toBe(true)
      // Its `ready` came before any layer listened: the layer must not wait for another one.
      await ready
      const seen = await withDatabase({ dataDir: dir, databaseUrl: undefined, embeddedSharedBuffersMb: 12 }, servedBy(thread))
      expect(seen).toEqual({ setting: "12MB", workers: 1, adopted: true })
      expect(takeEarlyThread()).toBeUndefined()
    } finally {
      takeEarlyThread()?.worker.terminate()
      rmSync(dir, { recursive: true, force: true })
    }
  }, 60_000)

  it("opened early with other settings than the layer's, is ended and replaced", async () => {
    const dir = embeddedDataDir()
    try {
      const thread = startEarlyThread()
      const exited = exitOf(thread)
      expect(openEarly({ dataDir: dir, sharedBuffersMb: 12 })).toBe(true)
      const seen = await withDatabase({ dataDir: dir, databaseUrl: undefined, embeddedSharedBuffersMb: 10 }, servedBy(thread))
      expect(seen).toEqual({ setting: "10MB", workers: 1, adopted: false })
      await exited
    } finally {
      takeEarlyThread()?.worker.terminate()
      rmSync(dir, { recursive: true, force: true })
    }
  }, 60_000)

  it("is not opened early on a data dir without a database, nor under another process's lock", async () => {
    const fresh = freshDataDir()
    const locked = embeddedDataDir()
    try {
      const thread = startEarlyThread()
      // A new data dir is made from the template by the layer first.
      expect(openEarly({ dataDir: fresh, sharedBuffersMb: 12 })).toBe(false)
      // A live process (vitest's own) holds this one.
      writeFileSync(join(locked, "gateway.lock"), String(process.ppid))
      expect(openEarly({ dataDir: locked, sharedBuffersMb: 12 })).toBe(false)
      // Still waiting for settings: the layer adopts it and sends its own.
      const seen = await withDatabase({ dataDir: fresh, databaseUrl: undefined, embeddedSharedBuffersMb: 11 }, servedBy(thread))
      expect(seen).toEqual({ setting: "11MB", workers: 1, adopted: true })
    } finally {
      takeEarlyThread()?.worker.terminate()
      rmSync(fresh, { recursive: true, force: true })
      rmSync(locked, { recursive: true, force: true })
    }
  }, 60_000)

  const { postgresUrl } = inject("services")
  it.skipIf(postgresUrl === null)("is ended by a layer on PostgreSQL, which has no use for it", async () => {
    const db = await migratedPostgresDatabase(postgresUrl!)
    try {
      startEarlyThread()
      await withDatabase({ databaseUrl: Redacted.make(db.url) }, Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        yield* sql`SELECT 1`
      }))
      expect(takeEarlyThread()).toBeUndefined()
      expect(embeddedWorkers()).toHaveLength(0)
    } finally {
      takeEarlyThread()?.worker.terminate()
      await db.drop()
    }
  }, 60_000)
})
