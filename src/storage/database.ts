/**
 * The SQL client: PostgreSQL when `DATABASE_URL` is set, otherwise PGlite (Postgres in WASM)
 * persisted under the data dir and run in a worker thread (`embedded-database.ts`), so both engines
 * are reached through the same `@effect/sql-pg` client, the same SQL and the same migrations.
 */
import * as NodeServices from "@effect/platform-node/NodeServices"
import { PgClient, PgMigrator } from "@effect/sql-pg"
import { Context, Effect, Layer, Redacted } from "effect"
import type { MessagePort } from "node:worker_threads"
import { SqlClient } from "effect/sql"
import { Settings } from "../config/settings.ts"
import { MAX_SQL_MESSAGE_BYTES } from "../util/json-limits.ts"
import { embeddedClient } from "./embedded-database.ts"
import { discardEarlyThread } from "./embedded-thread.ts"
import { migrations } from "./migrations.ts"
import { connectionGuards } from "./pg-connection.ts"
import { keepTransactionFailures } from "./sql-failures.ts"

/** Which engine this process runs on; tests and `/admin` read it. */
export class StorageEngine extends Context.Service<StorageEngine, {
  readonly kind: "embedded" | "postgres"
  /**
   * Embedded only: a new connection to the database as a bare MessagePort (undefined while its
   * worker restarts), for a worker thread's own client (`storage/port-stream.ts`).
   */
  readonly openPort?: (() => MessagePort | undefined) | undefined
}>()("gateway/storage/StorageEngine") {}

const migrationsLayer = PgMigrator.layer({ loader: PgMigrator.fromRecord(migrations), table: "gateway_migrations" }).pipe(
  Layer.provide(NodeServices.layer)
)

/** The client, migrated: PostgreSQL when a URL is set, otherwise the embedded database. */
const clientLayer = Layer.unwrap(Effect.gen(function*() {
  const settings = yield* Settings
  if (settings.databaseUrl !== undefined) {
    // `serve` starts the embedded database's thread before it reads its settings (see there).
    discardEarlyThread()
    const guards = connectionGuards(settings.storageTimeoutMs)
    const connection = { url: settings.databaseUrl, maxMessageSize: MAX_SQL_MESSAGE_BYTES, keepAlive: guards.keepAlive }
    // The migrations run first, on a connection of their own that is closed when they are done:
    // a backfill may rightly keep the server silent for minutes, so they have no answer deadline.
    const migrated = Layer.effectDiscard(Effect.scoped(Layer.build(migrationsLayer.pipe(Layer.provide(PgClient.layer({ ...connection, maxConnections: 1 }))))))
    return Layer.merge(
      // Whoever waits on a silent server (a request, the ledger's flush, a background loop) gets a
      // retryable failure at the answer deadline (`pg-connection.ts`); the request path's own
      // reads answer sooner, at one deadline (`storage/deadline.ts`).
      PgClient.layer({ ...connection, maxConnections: 10, answerTimeout: guards.answerTimeout }),
      Layer.succeed(StorageEngine)({ kind: "postgres" })
    ).pipe(Layer.provide(migrated))
  }
  let open: (() => MessagePort | undefined) | undefined
  const client = embeddedClient({
    dataDir: settings.dataDir,
    sharedBuffersMb: settings.embeddedSharedBuffersMb,
    diskReserveMb: settings.diskReserveMb,
    exposePorts: (o) => (open = o)
  })
  return migrationsLayer.pipe(
    Layer.provideMerge(Layer.merge(PgClient.layerFrom(client), Layer.succeed(StorageEngine)({ kind: "embedded", openPort: () => open?.() })))
  )
}))

/**
 * SqlClient + PgClient, migrated, with `withTransaction` keeping storage failures as failures
 * (`sql-failures.ts`). Requires Settings.
 */
export const DatabaseLive = Layer.effectDiscard(Effect.map(SqlClient.SqlClient, keepTransactionFailures)).pipe(
  Layer.provideMerge(clientLayer)
)

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
