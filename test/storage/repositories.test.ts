/**
 * Repositories run against both engines through the real layers (embedded PGlite in a temp dir,
 * and a fresh PostgreSQL database when one is reachable).
 */
import { describe, expect, it } from "@effect/vitest"
import { Context, Effect, Layer } from "effect"
import { ConfigFile } from "../../src/config/config-file.ts"
import { defaultConfig } from "../../src/config/default-config.ts"
import { Settings } from "../../src/config/settings.ts"
import { ApiKeys } from "../../src/keys/api-keys.ts"
import { KeysRepo } from "../../src/keys/keys-repo.ts"
import { newApiKeySecret } from "../../src/keys/secrets.ts"
import { StatesRepo } from "../../src/states/states-repo.ts"
import { DatabaseLive, StorageEngine } from "../../src/storage/database.ts"
import { storageTargets } from "../support/engines.ts"

const targets = storageTargets()

for (const target of targets) {
  describe(`repositories (${target.name})`, () => {
    const withServices = <A, E>(
      effect: Effect.Effect<A, E, ApiKeys | StatesRepo | StorageEngine | Layer.Success<typeof DatabaseLive> | ConfigFile | Settings>,
      keys: Layer.Layer<ApiKeys, never, Layer.Success<typeof DatabaseLive> | ConfigFile | Settings> = ApiKeys.layer
    ) =>
      Effect.acquireUseRelease(
        Effect.promise(target.make),
        ({ settings }) =>
          effect.pipe(Effect.provide(
            Layer.mergeAll(keys, StatesRepo.layer).pipe(
              Layer.provideMerge(DatabaseLive),
              Layer.provideMerge(ConfigFile.layerWith(defaultConfig)),
              Layer.provideMerge(Settings.layerWith(settings))
            )
          )),
        ({ cleanup }) => Effect.promise(cleanup)
      )

    it.live("ApiKeys: bootstrap once, authenticate by secret only, revoke", () =>
      withServices(Effect.gen(function*() {
        expect((yield* StorageEngine).kind).toBe(target.name)
        const keys = yield* ApiKeys
        const first = yield* keys.bootstrap()
        expect(first?.record.name).toBe("default")
        expect(yield* keys.bootstrap()).toBeUndefined()
        const created = yield* keys.create({ name: "a", plan: "pro" })
        expect((yield* keys.authenticate(created.secret))?.id).toBe(created.record.id)
        expect(yield* keys.authenticate(created.secret + "x")).toBeUndefined()
        expect(yield* keys.authenticate(created.record.hint)).toBeUndefined()
        yield* keys.revoke(created.record.id)
        expect(yield* keys.authenticate(created.secret)).toBeUndefined()
        const missing = yield* Effect.flip(keys.revoke("key_missing"))
        expect(missing._tag).toBe("NotFound")
        const badPlan = yield* Effect.flip(keys.create({ plan: "nope" }))
        expect(badPlan._tag).toBe("InvalidRequest")
      })), 60_000)

    it.live("ApiKeys: made-up keys past the cache's size do not push known keys out of it", () =>
      withServices(Effect.gen(function*() {
        // This instance caches 10 answers of each kind; another instance revokes behind its back.
        const keys = yield* ApiKeys
        const other = Context.get(yield* Layer.build(ApiKeys.layer), ApiKeys)
        const known = yield* keys.create({ name: "known", plan: "pro" })
        expect((yield* keys.authenticate(known.secret))?.id).toBe(known.record.id)
        yield* other.revoke(known.record.id)
        for (let i = 0; i < 30; i++) expect(yield* keys.authenticate(newApiKeySecret())).toBeUndefined()
        // Still answered from the cache (for its 5 s): the thirty unknown keys filled their own.
        expect((yield* keys.authenticate(known.secret))?.id).toBe(known.record.id)
        expect(yield* other.authenticate(known.secret)).toBeUndefined()
      }).pipe(Effect.scoped), ApiKeys.layerWith({ cacheMaxEntries: 10 })), 60_000)

    it.live("ApiKeys: concurrent look-ups of unknown secrets go to the store together, not one statement each", () => {
      // The real repository, its statements counted.
      const statements = { count: 0, largest: 0 }
      const counted = Layer.effect(KeysRepo, Effect.map(Effect.service(KeysRepo), (real) =>
        KeysRepo.of({
          ...real,
          findByHashes: (hashes) => Effect.suspend(() => {
            statements.count++
            statements.largest = Math.max(statements.largest, hashes.length)
            return real.findByHashes(hashes)
          })
        }))).pipe(Layer.provide(KeysRepo.layer))
      return withServices(Effect.gen(function*() {
        const keys = yield* ApiKeys
        const known = yield* keys.create({ name: "known", plan: "pro" })
        // 300 made-up keys at once, and a real one among them: each gets its own answer.
        const secrets = Array.from({ length: 300 }, () => newApiKeySecret())
        secrets.splice(150, 0, known.secret)
        const answers = yield* Effect.forEach(secrets, (secret) => keys.authenticate(secret), { concurrency: "unbounded" })
        expect(answers.filter((a) => a !== undefined).map((a) => a!.id)).toEqual([known.record.id])
        // One statement per batch (one running, the rest gathered behind it): not 301.
        expect(statements.count).toBeGreaterThan(0)
        expect(statements.count).toBeLessThanOrEqual(4)
        expect(statements.largest).toBeLessThanOrEqual(500)
      }), ApiKeys.layerWith({ cacheMaxEntries: 1_000, repo: counted }))
    }, 60_000)

    it.live("StatesRepo: seq increases per append, scoped to the key", () =>
      withServices(Effect.gen(function*() {
        const repo = yield* StatesRepo
        const s = yield* repo.create("key_a", { n: 1 })
        const s1 = yield* repo.append("key_a", s.stateId, { m: 2 }, undefined)
        expect({ ...s1, text: JSON.parse(Buffer.concat(s1.text).toString()) }).toEqual({ stateId: s.stateId, seq: 1, text: { n: 1, m: 2 }, bytes: 13 })
        const other = yield* Effect.flip(repo.get("key_b", s.stateId))
        expect(other._tag).toBe("NotFound")
        const stale = yield* Effect.flip(repo.append("key_a", s.stateId, { m: 3 }, 0))
        expect(stale._tag).toBe("Conflict")
      })), 60_000)
  })
}
