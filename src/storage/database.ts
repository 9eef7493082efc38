/**
 * The SQL client: PostgreSQL when `DATABASE_URL` is set, otherwise PGlite (Postgres in WASM)
 * persisted under the data dir and served over a Unix socket, so both engines are reached through
 * the same `@effect/sql-pg` client, the same SQL and the same migrations.
 */
import { PGlite } from "@electric-sql/pglite"
import { PGLiteSocketServer } from "@electric-sql/pglite-socket"
import { NodeServices } from "@effect/platform-node"
import { PgClient, PgMigrator } from "@effect/sql-pg"
import { Context, Effect, Layer, Redacted, Schema } from "effect"
import { SqlClient } from "effect/sql"
import { rmSync } from "node:fs"
import { join } from "node:path"
import { Settings } from "../config/settings.ts"
import { MAX_STORED_JSON_BYTES } from "../util/json-limits.ts"
import { lockDataDir } from "./data-dir.ts"
import { migrations } from "./migrations.ts"
import { keepTransactionFailures } from "./sql-failures.ts"

/**
 * Largest protocol message the client reads (the driver's default is 16 MiB). A row is one
 * message, and a row may hold a few documents of up to `MAX_STORED_JSON_BYTES` each (a run's
 * input, tools and metadata), so the client must read several times that: a row it cannot read
 * back would be stored and then unreadable.
 */
const MAX_MESSAGE_BYTES = 4 * MAX_STORED_JSON_BYTES

export class StorageError extends Schema.TaggedError<StorageError>()("StorageError", {
  message: Schema.String
}) {}

/** Which engine this process runs on; tests and `/admin` read it. */
export class StorageEngine extends Context.Service<StorageEngine, {
  readonly kind: "embedded" | "postgres"
}>()("gateway/storage/StorageEngine") {}

const embeddedClient = (dataDir: string) =>
  Effect.gen(function*() {
    yield* lockDataDir(dataDir)
    const db = yield* Effect.acquireRelease(
      Effect.tryPromise({
        try: () => PGlite.create({ dataDir: join(dataDir, "pglite") }),
        catch: (cause) => new StorageError({ message: `cannot open the embedded database: ${String(cause)}` })
      }),
      (db) => Effect.promise(() => db.close()).pipe(Effect.ignore)
    )
    // Unix socket paths are limited to ~107 bytes; fall back to loopback TCP on a random port.
    const socketPath = join(dataDir, ".pg.sock")
    const useSocket = Buffer.byteLength(socketPath) < 100
    // A process killed with SIGKILL leaves its socket file behind; we hold the data dir's lock,
    // so no live process can be using it.
    if (useSocket) rmSync(socketPath, { force: true })
    const server = yield* Effect.acquireRelease(
      Effect.tryPromise({
        try: async () => {
          const server = new PGLiteSocketServer(
            useSocket ? { db, path: socketPath, maxConnections: 8 } : { db, host: "127.0.0.1", port: 0, maxConnections: 8 }
          )
          await server.start()
          return server
        },
        catch: (cause) => new StorageError({ message: `cannot serve the embedded database: ${String(cause)}` })
      }),
      (server) => Effect.promise(() => server.stop()).pipe(Effect.ignore)
    )
    const target = useSocket
      ? { path: socketPath }
      : { host: "127.0.0.1", port: Number(server.getServerConn().split(":").pop()) }
    // PGlite runs one statement at a time; one pooled connection keeps transactions simple and safe.
    return yield* PgClient.make({ ...target, username: "postgres", database: "postgres", maxConnections: 1, maxMessageSize: MAX_MESSAGE_BYTES })
  })

const clientLayer = Layer.unwrap(Effect.gen(function*() {
  const settings = yield* Settings
  if (settings.databaseUrl !== undefined) {
    return Layer.merge(
      PgClient.layer({ url: settings.databaseUrl, maxConnections: 10, maxMessageSize: MAX_MESSAGE_BYTES }),
      Layer.succeed(StorageEngine)({ kind: "postgres" })
    )
  }
  return Layer.merge(PgClient.layerFrom(embeddedClient(settings.dataDir)), Layer.succeed(StorageEngine)({ kind: "embedded" }))
}))

const migrationsLayer = PgMigrator.layer({ loader: PgMigrator.fromRecord(migrations), table: "gateway_migrations" }).pipe(
  Layer.provide(NodeServices.layer)
)

/** The client with `withTransaction` keeping storage failures as failures (`sql-failures.ts`). */
const failingClientLayer = Layer.effectDiscard(Effect.map(SqlClient.SqlClient, keepTransactionFailures)).pipe(
  Layer.provideMerge(clientLayer)
)

/** SqlClient + PgClient, migrated. Requires Settings. */
export const DatabaseLive = migrationsLayer.pipe(Layer.provideMerge(failingClientLayer))

/** Makes a Redacted URL printable without its password, for logs. */
export const describeDatabase = (url: Redacted.Redacted<string> | undefined) => {
  if (url === undefined) return "embedded PGlite"
  try {
    const u = new URL(Redacted.value(url))
    u.password = ""
    return `PostgreSQL ${u.host}${u.pathname}`
  } catch {
    return "PostgreSQL"
  }
}
