/** SQL access to `api_keys` and the bootstrap marker in `gateway_meta`. Only hashes are stored. */
import { Context, Effect, Layer } from "effect"
import { SqlClient, type SqlError } from "effect/sql"
import type { Permissions } from "./permissions.ts"

export interface KeyRecord {
  readonly id: string
  readonly name: string | null
  readonly hint: string
  readonly plan: string
  readonly permissions: Permissions
  readonly createdAt: Date
  readonly revokedAt: Date | null
}

interface KeyRow {
  readonly id: string
  readonly name: string | null
  readonly hint: string
  readonly plan: string
  readonly permissions: Permissions
  readonly created_at: Date
  readonly revoked_at: Date | null
}

const toRecord = (row: KeyRow): KeyRecord => ({
  id: row.id,
  name: row.name,
  hint: row.hint,
  plan: row.plan,
  permissions: { surfaces: row.permissions?.surfaces ?? null, models: row.permissions?.models ?? null },
  createdAt: new Date(row.created_at),
  revokedAt: row.revoked_at === null ? null : new Date(row.revoked_at)
})

export class KeysRepo extends Context.Service<KeysRepo, {
  insert(key: { id: string; hash: string; hint: string; name: string | null; plan: string; permissions: Permissions }): Effect.Effect<KeyRecord, SqlError.SqlError>
  /** The keys whose secrets hash to `hashes`, by hash (an unknown hash is not in the map). */
  findByHashes(hashes: ReadonlyArray<string>): Effect.Effect<ReadonlyMap<string, KeyRecord>, SqlError.SqlError>
  findById(id: string): Effect.Effect<KeyRecord | undefined, SqlError.SqlError>
  list(): Effect.Effect<ReadonlyArray<KeyRecord>, SqlError.SqlError>
  update(id: string, changes: { plan?: string; permissions?: Permissions; name?: string | null }): Effect.Effect<KeyRecord | undefined, SqlError.SqlError>
  revoke(id: string): Effect.Effect<KeyRecord | undefined, SqlError.SqlError>
  /** Marks the store bootstrapped; true only for the caller that set the marker first. */
  claimBootstrap(): Effect.Effect<boolean, SqlError.SqlError>
}>()("gateway/keys/KeysRepo") {
  static readonly layer = Layer.effect(KeysRepo, Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const columns = sql`id, name, hint, plan, permissions, created_at, revoked_at`

    const insert = Effect.fn("KeysRepo.insert")(function*(key: { id: string; hash: string; hint: string; name: string | null; plan: string; permissions: Permissions }) {
      const rows = yield* sql<KeyRow>`INSERT INTO api_keys (id, key_hash, hint, name, plan, permissions)
        VALUES (${key.id}, ${key.hash}, ${key.hint}, ${key.name}, ${key.plan}, ${JSON.stringify(key.permissions)}::jsonb)
        RETURNING ${columns}`
      return toRecord(rows[0])
    })
    const findByHashes = Effect.fn("KeysRepo.findByHashes")(function*(hashes: ReadonlyArray<string>) {
      const rows = hashes.length === 0 ? [] : yield* sql<KeyRow & { key_hash: string }>`SELECT key_hash, ${columns} FROM api_keys WHERE key_hash IN ${sql.in(hashes)}`
      return new Map(rows.map((row) => [row.key_hash, toRecord(row)]))
    })
    const findById = Effect.fn("KeysRepo.findById")(function*(id: string) {
      const rows = yield* sql<KeyRow>`SELECT ${columns} FROM api_keys WHERE id = ${id}`
      return rows.length === 0 ? undefined : toRecord(rows[0])
    })
    const list = Effect.fn("KeysRepo.list")(function*() {
      const rows = yield* sql<KeyRow>`SELECT ${columns} FROM api_keys ORDER BY created_at, id`
      return rows.map(toRecord)
    })
    const update = Effect.fn("KeysRepo.update")(function*(id: string, changes: { plan?: string; permissions?: Permissions; name?: string | null }) {
      const rows = yield* sql<KeyRow>`UPDATE api_keys SET
          plan = COALESCE(${changes.plan ?? null}, plan),
          permissions = COALESCE(${changes.permissions === undefined ? null : JSON.stringify(changes.permissions)}::jsonb, permissions),
          name = CASE WHEN ${changes.name !== undefined} THEN ${changes.name ?? null} ELSE name END
        WHERE id = ${id} RETURNING ${columns}`
      return rows.length === 0 ? undefined : toRecord(rows[0])
    })
    const revoke = Effect.fn("KeysRepo.revoke")(function*(id: string) {
      const rows = yield* sql<KeyRow>`UPDATE api_keys SET revoked_at = COALESCE(revoked_at, now())
        WHERE id = ${id} RETURNING ${columns}`
      return rows.length === 0 ? undefined : toRecord(rows[0])
    })
    const claimBootstrap = Effect.fn("KeysRepo.claimBootstrap")(function*() {
      const rows = yield* sql`INSERT INTO gateway_meta (name, value) VALUES ('bootstrapped', 'true'::jsonb)
        ON CONFLICT (name) DO NOTHING RETURNING name`
      return rows.length === 1
    })
    return KeysRepo.of({ insert, findByHashes, findById, list, update, revoke, claimBootstrap })
  }))
}
