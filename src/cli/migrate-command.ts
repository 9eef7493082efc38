/** `gateway migrate`: applies the migrations (they also run at every start) and exits. */
import { Console, Effect } from "effect"
import { Settings } from "../config/settings.ts"
import { DatabaseLive, describeDatabase } from "../storage/database.ts"

export const migrateCommand = Effect.gen(function*() {
  const settings = yield* Settings
  yield* Effect.provide(Effect.void, DatabaseLive)
  yield* Console.log(`migrations applied (${describeDatabase(settings.databaseUrl)})`)
})
