/**
 * Migration 0012 (a state's value from one jsonb column into chunks of its JSON text): states
 * written before it read back the same values after it, on a real PostgreSQL, through the
 * gateway's own database layer and repository.
 */
import { describe, expect, it } from "@effect/vitest"
import { PgClient, PgMigrator } from "@effect/sql-pg"
import { Effect, Layer, Redacted } from "effect"
import { SqlClient } from "effect/sql"
import { NodeServices } from "@effect/platform-node"
import { inject } from "vitest"
import { defaultConfig } from "../../src/config/default-config.ts"
import { ConfigFile } from "../../src/config/config-file.ts"
import { Settings } from "../../src/config/settings.ts"
import { StatesRepo, STATE_CHUNK_BYTES } from "../../src/states/states-repo.ts"
import { DatabaseLive } from "../../src/storage/database.ts"
import { migrations } from "../../src/storage/migrations.ts"
import { freshPostgresDatabase } from "../support/engines.ts"

const { postgresUrl } = inject("services")

describe.skipIf(postgresUrl === null)("migration 0012_state_chunks (PostgreSQL)", () => {
  it.live("moves every stored value into chunks; the values read back the same", () =>
    Effect.acquireUseRelease(
      Effect.promise(() => freshPostgresDatabase(postgresUrl!)),
      (db) =>
        Effect.gen(function*() {
          const values = {
            state_small: { b: [1, "é😀", null], a: { "q\"": true } },
            state_null: null,
            state_large: "ab".repeat(STATE_CHUNK_BYTES) + "😀",
            state_exact: "x".repeat(STATE_CHUNK_BYTES - 2)
          }
          // The schema as it was before 0012, with states written the old way.
          const before = Object.fromEntries(Object.entries(migrations).filter(([name]) => name < "0012"))
          yield* Effect.gen(function*() {
            const sql = yield* SqlClient.SqlClient
            for (const [id, value] of Object.entries(values)) {
              yield* sql`INSERT INTO states (id, key_id, seq, value) VALUES (${id}, 'key_a', 7, ${JSON.stringify(value)}::jsonb)`
            }
          }).pipe(
            Effect.provide(PgMigrator.layer({ loader: PgMigrator.fromRecord(before), table: "gateway_migrations" }).pipe(
              Layer.provideMerge(PgClient.layer({ url: Redacted.make(db.url) })),
              Layer.provide(NodeServices.layer)
            ))
          )
          // The gateway's own layer applies the rest.
          yield* Effect.gen(function*() {
            const repo = yield* StatesRepo
            for (const [id, value] of Object.entries(values)) {
              const state = yield* repo.get("key_a", id)
              expect(state.seq).toBe(7)
              expect(state.bytes).toBe(state.text.reduce((sum, chunk) => sum + chunk.byteLength, 0))
              for (const chunk of state.text) expect(chunk.byteLength).toBeLessThanOrEqual(STATE_CHUNK_BYTES)
              expect(JSON.parse(Buffer.concat(state.text).toString())).toEqual(value)
            }
            expect((yield* repo.get("key_a", "state_large")).text).toHaveLength(3)
            // Appends go on from there.
            const appended = yield* repo.append("key_a", "state_large", "!", 7)
            expect(JSON.parse(Buffer.concat(appended.text).toString())).toBe(values.state_large + "!")
            expect(appended.seq).toBe(8)
          }).pipe(
            Effect.provide(StatesRepo.layer.pipe(
              Layer.provideMerge(DatabaseLive),
              Layer.provideMerge(ConfigFile.layerWith(defaultConfig)),
              Layer.provide(Settings.layerWith({ databaseUrl: Redacted.make(db.url), redisUrl: undefined }))
            ))
          )
        }),
      (db) => Effect.promise(db.drop)
    ), 60_000)
})
