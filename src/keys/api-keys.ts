/**
 * API keys: creation (the secret is returned once and stored only as a hash), listing, plan and
 * permission changes, revocation, and authentication through an in-memory cache so the hot path
 * costs no SQL round trip. Changes made through this service drop the cached entry at once;
 * entries made elsewhere (another instance, the CLI) are picked up within `CACHE_TTL_MS`.
 *
 * When the key store cannot answer (an error, or no answer within `storageTimeoutMs`: a stalled
 * database must not hold requests without end), a key verified at most `STALE_IF_ERROR_MS` past
 * its cache lifetime is still honoured, as Kong's `resurrect_ttl` does, so a database fail-over
 * of a few seconds does not stop the traffic of keys in use; any other key gets a 503. Concurrent
 * look-ups of one key share one query.
 */
import { Clock, Context, Deferred, Effect, Exit, Layer } from "effect"
import type { SqlError } from "effect/sql"
import { ConfigFile } from "../config/config-file.ts"
import { InvalidRequest, NotFound, ServiceUnavailable } from "../errors.ts"
import { isPastDeadline, storageDeadlines } from "../storage/deadline.ts"
import { type KeyRecord, KeysRepo } from "./keys-repo.ts"
import { allPermissions, type Permissions } from "./permissions.ts"
import { hintOf, newApiKeySecret, sha256Hex } from "./secrets.ts"
import { type CoalescedRuns, coalescedRuns } from "../util/coalesced-runs.ts"
import { newId } from "../util/ids.ts"

const CACHE_TTL_MS = 5_000
/** Entries of each cache (known keys, unknown ones) before it starts over. */
const CACHE_MAX_ENTRIES = 50_000
/** Hashes looked up in one statement at most. */
const LOOKUP_BATCH = 500
/** How long past its cache lifetime a verified key is honoured while the key store cannot answer. */
const STALE_IF_ERROR_MS = 30_000

interface CachedKey {
  readonly record: KeyRecord | undefined
  /** Until when the entry is used without asking the store. */
  readonly expiresAt: number
  /** When the store last answered for it: stale use ends `CACHE_TTL_MS + STALE_IF_ERROR_MS` after. */
  readonly verifiedAt: number
}

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
  /** The active key a secret belongs to, or undefined (unknown or revoked); 503 when the store cannot tell. */
  authenticate(secret: string): Effect.Effect<KeyRecord | undefined, ServiceUnavailable>
  /** On a fresh store, creates the first key and returns it; afterwards returns undefined. */
  bootstrap(): Effect.Effect<CreatedKey | undefined, InvalidRequest | SqlError.SqlError>
}>()("gateway/keys/ApiKeys") {
  /**
   * With another cache size (tests: what a flood past it does, without 50,000 look-ups), or over
   * another repository layer (tests: one that counts the statements).
   */
  static readonly layerWith = (options: { readonly cacheMaxEntries: number; readonly repo?: typeof KeysRepo.layer }) =>
    Layer.effect(ApiKeys, Effect.suspend(() => makeApiKeys(options.cacheMaxEntries))).pipe(Layer.provide(options.repo ?? KeysRepo.layer))
  static readonly layer = ApiKeys.layerWith({ cacheMaxEntries: CACHE_MAX_ENTRIES })
}

const makeApiKeys = (cacheMaxEntries: number) =>
  Effect.gen(function*() {
    const repo = yield* KeysRepo
    const config = yield* ConfigFile
    const { storageTimeoutMs, read } = yield* storageDeadlines
    const cache = new Map<string, CachedKey>()
    /**
     * Unknown secrets' answers, apart from known keys': made-up keys (they need no key to send)
     * fill and clear this one only. In one map, 50,000 of them cleared the known keys too, and
     * every client's next request waited for the store.
     */
    const misses = new Map<string, CachedKey>()
    const lookups = new Map<string, Deferred.Deferred<KeyRecord | undefined, ServiceUnavailable>>()
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

    const unavailable = (why: string) => new ServiceUnavailable({ status: 503, message: `Key store unavailable (${why})`, retryAfterSeconds: 1 })

    /**
     * Whether the key store's last look-up failed or timed out (and none has succeeded since):
     * known keys are then honoured at once from the cache, with their look-up in the background.
     */
    let storeTroubled = false
    let warnedAt = 0

    /** The store's answer for one hash: cached, and the key remembered by id. */
    const answered = (hash: string, row: KeyRecord | undefined, now: number) => {
      const record = row === undefined || row.revokedAt !== null ? undefined : row
      const [entries, other] = record === undefined ? [misses, cache] : [cache, misses]
      if (entries.size >= cacheMaxEntries) entries.clear()
      entries.set(hash, { record, expiresAt: now + CACHE_TTL_MS, verifiedAt: now })
      other.delete(hash)
      if (record !== undefined) hashById.set(record.id, hash)
      return record
    }

    /**
     * Hashes waiting for the store, in order; each has its answer in `lookups` until it comes. The
     * look-ups go out LOOKUP_BATCH at a time, one statement at a time (`coalescedRuns`): hashes that
     * come while one runs go together in the next. A flood of made-up keys (anyone can send them)
     * costs a statement per batch, not one each, and cannot take the database from the gateway's
     * other work; a new key's client waits for at most the statement already running.
     */
    const queued: Array<string> = []
    const lookUpQueued: Effect.Effect<void, ServiceUnavailable> = Effect.suspend(() => {
      const hashes = queued.splice(0, LOOKUP_BATCH)
      const settle = (exit: Exit.Exit<KeyRecord | undefined, ServiceUnavailable>, hash: string) => {
        const done = lookups.get(hash)
        lookups.delete(hash)
        if (done !== undefined) Deferred.doneUnsafe(done, exit)
      }
      // Answers at the deadline (`storage/deadline.ts`) whatever its statement does after; the rest
      // of the queue goes in the next run (an ask during a run marks one more).
      return Effect.andThen(queued.length > 0 ? batches.ask : Effect.void, read(repo.findByHashes(hashes))).pipe(
        Effect.flatMap((rows) => Effect.map(Clock.currentTimeMillis, (now) => {
          storeTroubled = false
          for (const hash of hashes) settle(Exit.succeed(answered(hash, rows.get(hash), now)), hash)
        })),
        Effect.mapError((error) => unavailable(isPastDeadline(error) ? `no answer within ${storageTimeoutMs} ms` : "the database failed")),
        Effect.onExit((exit) => Effect.sync(() => {
          if (Exit.isSuccess(exit)) return
          storeTroubled = true
          for (const hash of hashes) settle(exit as Exit.Exit<never, ServiceUnavailable>, hash)
        }))
      )
    })
    const batches: CoalescedRuns<void, never> = coalescedRuns(Effect.ignore(lookUpQueued), yield* Effect.scope)

    /** The store's answer for a hash, shared by concurrent callers. */
    const lookUp = (hash: string): Effect.Effect<Deferred.Deferred<KeyRecord | undefined, ServiceUnavailable>> =>
      Effect.suspend(() => {
        const running = lookups.get(hash)
        if (running !== undefined) return Effect.succeed(running)
        const done = Deferred.makeUnsafe<KeyRecord | undefined, ServiceUnavailable>()
        lookups.set(hash, done)
        queued.push(hash)
        return Effect.as(batches.ask, done)
      })

    const honourStale = Effect.fnUntraced(function*(cached: CachedKey, now: number, cause?: unknown) {
      if (now - warnedAt >= 10_000) {
        warnedAt = now
        yield* Effect.logWarning(`keys: the key store cannot answer; keys verified in the last ${(CACHE_TTL_MS + STALE_IF_ERROR_MS) / 1000} s are honoured meanwhile`, cause)
      }
      return cached.record
    })

    const authenticate = Effect.fnUntraced(function*(secret: string) {
      const hash = sha256Hex(secret)
      const now = yield* Clock.currentTimeMillis
      const cached = cache.get(hash) ?? misses.get(hash)
      if (cached !== undefined && cached.expiresAt > now) return cached.record
      const stale = cached !== undefined && now - cached.verifiedAt <= CACHE_TTL_MS + STALE_IF_ERROR_MS ? cached : undefined
      const busy = lookups.has(hash)
      const answer = yield* lookUp(hash)
      // A known key does not wait on a store in trouble, nor queue behind its own look-up.
      if (stale !== undefined && (storeTroubled || busy)) return yield* honourStale(stale, now)
      const result = yield* Effect.exit(Deferred.await(answer))
      if (Exit.isSuccess(result)) return result.value
      if (stale === undefined) return yield* result
      return yield* honourStale(stale, now, result.cause)
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
  })
