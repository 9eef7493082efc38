/**
 * Child process for the crash test: opens the embedded database in the data dir given as argv[2]
 * and commits one row per transaction forever, printing "committed <id>" after each COMMIT
 * returned. The test kills it with SIGKILL and checks that every printed id survived.
 */
import { Effect, Layer } from "effect"
import { SqlClient } from "effect/sql"
import { Settings } from "../../../src/config/settings.ts"
import { DatabaseLive } from "../../../src/storage/database.ts"

const program = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`CREATE TABLE IF NOT EXISTS crash_rows (id int PRIMARY KEY, note text NOT NULL)`
  const start = (yield* sql<{ next: number }>`SELECT coalesce(max(id), 0) + 1 AS next FROM crash_rows`)[0]!.next
  for (let id = start; ; id++) {
    yield* sql.withTransaction(sql`INSERT INTO crash_rows (id, note) VALUES (${id}, ${"row " + id})`)
    process.stdout.write(`committed ${id}\n`)
  }
})

await Effect.runPromise(Effect.provide(program, DatabaseLive.pipe(Layer.provide(Settings.layerWith({ dataDir: process.argv[2]!, databaseUrl: undefined })))))
