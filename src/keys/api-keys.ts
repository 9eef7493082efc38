/**
 * API keys: creation (the secret is returned once and stored only as a hash), listing, plan and
 * permission changes, revocation, and authentication through an in-memory cache so the hot path
 * costs no SQL round trip. Changes made through this service drop the cached entry at once;
 * entries made elsewhere (another instance, the CLI) are picked up within `CACHE_TTL_MS`.
 */
import { Clock, Context, Effect, Layer } from "effect"
import type { SqlError } from "effect/sql"
import { ConfigFile } from "../config/config-file.ts"
import { InvalidRequest, NotFound } from "../errors.ts"
import { type KeyRecord, KeysRepo } from "./keys-repo.ts"
import { allPermissions, type Permissions } from "./permissions.ts"
import { hintOf, newApiKeySecret, sha256Hex } from "./secrets.ts"
import { newId } from "../util/ids.ts"

const CACHE_TTL_MS = 5_000
const CACHE_MAX_ENTRIES = 50_000

export interface CreatedKey {
  readonly record: KeyRecord
  /** The secret itself: shown once, never stored. */
  readonly secret: string
}

/** Why a plan name is refused (it is not in the config's plans), or undefined when it is known. */
export const unknownPlan = (config: { readonly plans: Readonly<Record<string, unknown>> }, plan: string): string | undefined =>
  plan in config.plans ? undefined : `plan: unknown plan "${plan}"; known plans: ${Object.keys(config.plans).join(", ")}`

export class ApiKeys extends Context.Service<ApiKeys, {
  create(input: { name?: string | null; plan?: string; permissions?: Permissions }): Effect.Effect<CreatedKey, InvalidRequest | SqlError.SqlError>
  list(): Effect.Effect<ReadonlyArray<KeyRecord>, SqlError.SqlError>
  get(id: string): Effect.Effect<KeyRecord, NotFound | SqlError.SqlError>
  update(id: string, changes: { plan?: string; permissions?: Permissions; name?: string | null }): Effect.Effect<KeyRecord, NotFound | InvalidRequest | SqlError.SqlError>
  revoke(id: string): Effect.Effect<KeyRecord, NotFound | SqlError.SqlError>
  /** The active key a secret belongs to, or undefined (unknown or revoked). */
  authenticate(secret: string): Effect.Effect<KeyRecord | undefined, SqlError.SqlError>
  /** On a fresh store, creates the first key and returns it; afterwards returns undefined. */
  bootstrap(): Effect.Effect<CreatedKey | undefined, InvalidRequest | SqlError.SqlError>
}>()("gateway/keys/ApiKeys") {
  static readonly layer = Layer.effect(ApiKeys, Effect.gen(function*() {
    const repo = yield* KeysRepo
    const config = yield* ConfigFile
    const cache = new Map<string, { record: KeyRecord | undefined; expiresAt: number }>()
    const hashById = new Map<string, string>()

    const checkPlan = (plan: string) => {
      const message = unknownPlan(config, plan)
      return message === undefined ? Effect.void : Effect.fail(new InvalidRequest({ message, param: "plan" }))
    }

    const forget = (id: string) => {
      const hash = hashById.get(id)
      if (hash !== undefined) cache.delete(hash)
    }
    const found = (id: string) => (record: KeyRecord | undefined) =>
      record === undefined
        ? Effect.fail(new NotFound({ kind: "resource", message: `No key with id ${id}` }))
        : Effect.succeed(record)

    const create = Effect.fn("ApiKeys.create")(function*(input: { name?: string | null; plan?: string; permissions?: Permissions }) {
      const plan = input.plan ?? config.defaultPlan
      yield* checkPlan(plan)
      const secret = newApiKeySecret()
      const record = yield* repo.insert({
        id: newId("key"),
        hash: sha256Hex(secret),
        hint: hintOf(secret),
        name: input.name ?? null,
        plan,
        permissions: input.permissions ?? allPermissions
      })
      return { record, secret }
    })

    const update = Effect.fn("ApiKeys.update")(function*(id: string, changes: { plan?: string; permissions?: Permissions; name?: string | null }) {
      if (changes.plan !== undefined) yield* checkPlan(changes.plan)
      const record = yield* repo.update(id, changes).pipe(Effect.flatMap(found(id)))
      forget(id)
      return record
    })

    const revoke = Effect.fn("ApiKeys.revoke")(function*(id: string) {
      const record = yield* repo.revoke(id).pipe(Effect.flatMap(found(id)))
      forget(id)
      return record
    })

    const authenticate = Effect.fnUntraced(function*(secret: string) {
      const hash = sha256Hex(secret)
      const now = yield* Clock.currentTimeMillis
      const cached = cache.get(hash)
      if (cached !== undefined && cached.expiresAt > now) return cached.record
      const row = yield* repo.findByHash(hash)
      const record = row === undefined || row.revokedAt !== null ? undefined : row
      if (cache.size >= CACHE_MAX_ENTRIES) cache.clear()
      cache.set(hash, { record, expiresAt: now + CACHE_TTL_MS })
      if (row !== undefined) hashById.set(row.id, hash)
      return record
    })

    const bootstrap = Effect.fn("ApiKeys.bootstrap")(function*() {
      const first = yield* repo.claimBootstrap()
      // Keys made with `gateway keys create` before the first start count as the first key.
      if (!first || (yield* repo.list()).length > 0) return undefined
      return yield* create({ name: "default" })
    })

    return ApiKeys.of({
      create,
      list: repo.list,
      get: (id) => repo.findById(id).pipe(Effect.flatMap(found(id))),
      update,
      revoke,
      authenticate,
      bootstrap
    })
  })).pipe(Layer.provide(KeysRepo.layer))
}
