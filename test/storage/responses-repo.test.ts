/**
 * Stored responses on both engines, through the real layers: retention (an expired response reads
 * as absent at once and the sweep deletes it with its items), item lookups scoped to the key, and
 * deletion cascading to the items.
 */
import { describe, expect, it } from "@effect/vitest"
import { ConfigProvider, Effect, Layer } from "effect"
import { SqlClient } from "effect/sql"
import { ConfigFile } from "../../src/config/config-file.ts"
import { defaultConfig } from "../../src/config/default-config.ts"
import { Settings } from "../../src/config/settings.ts"
import { type NewStoredResponse, ResponsesRepo } from "../../src/stored-responses/responses-repo.ts"
import { DatabaseLive } from "../../src/storage/database.ts"
import { storageTargets } from "../support/engines.ts"

// Read by Settings from its config provider, as the gateway reads it from its
// environment (given here, not set in process.env, which would outlive this file in its worker).
const retentionOneDay = ConfigProvider.layerAdd(ConfigProvider.fromUnknown({ GATEWAY_RESPONSE_RETENTION_DAYS: "1" }), { asPrimary: true })

const targets = storageTargets()


const stored = (id: string, keyId: string): NewStoredResponse => ({
  id,
  keyId,
  model: "svc-pico-1",
  body: { id, output: [] },
  transcript: { system: [], messages: [] },
  replay: { createdAt: 0, echo: null, events: [] },
  inputItems: [],
  items: [{ id: `msg_${id}_0`, item: JSON.stringify({ id: `msg_${id}_0`, type: "message", text: "a\u0000b" }) }]
})

for (const target of targets) {
  describe(`ResponsesRepo (${target.name})`, () => {
    const withRepo = <A, E>(effect: Effect.Effect<A, E, ResponsesRepo | SqlClient.SqlClient>) =>
      Effect.acquireUseRelease(
        Effect.promise(target.make),
        ({ settings }) =>
          effect.pipe(Effect.provide(
            ResponsesRepo.layer.pipe(
              Layer.provideMerge(DatabaseLive),
              Layer.provideMerge(ConfigFile.layerWith(defaultConfig)),
              Layer.provide(Settings.layerWith(settings)),
              Layer.provide(retentionOneDay)
            )
          )),
        ({ cleanup }) => Effect.promise(cleanup)
      )

    it.live("keeps responses GATEWAY_RESPONSE_RETENTION_DAYS: older ones read as absent, then are pruned with their items", () =>
      withRepo(Effect.gen(function*() {
        const repo = yield* ResponsesRepo
        const sql = yield* SqlClient.SqlClient
        expect(repo.retentionDays).toBe(1)
        yield* repo.save(stored("resp_old", "key_a"))
        yield* repo.save(stored("resp_new", "key_a"))
        expect((yield* repo.findItems("key_a", ["msg_resp_old_0"])).get("msg_resp_old_0")).toEqual({ id: "msg_resp_old_0", type: "message", text: "a\u0000b" })
        // In one transaction: the repository's own start-up prune, which may still be getting its
        // connection, sees resp_old as fresh until this commits, so the prune below is the one
        // that removes it.
        yield* sql.withTransaction(Effect.gen(function*() {
          yield* sql`UPDATE stored_responses SET created_at = now() - interval '25 hours' WHERE id = 'resp_old'`

          expect(yield* repo.find("key_a", "resp_old")).toBeUndefined()
          expect(yield* repo.conversation("key_a", "resp_old")).toBeUndefined()
          expect((yield* repo.findItems("key_a", ["msg_resp_old_0", "msg_resp_new_0"])).size).toBe(1)
          expect(yield* repo.remove("key_a", "resp_old")).toBe(false)

          expect(yield* repo.prune()).toBe(1)
          const left = yield* sql<{ id: string }>`SELECT id FROM stored_response_items ORDER BY id`
          expect(left.map((row) => row.id)).toEqual(["msg_resp_new_0"])
          expect((yield* repo.find("key_a", "resp_new"))?.id).toBe("resp_new")
        }))
      })), 60_000)

    it.live("stores large documents (staged in pieces) and reads them back exactly, leaving nothing staged", () =>
      withRepo(Effect.gen(function*() {
        const repo = yield* ResponsesRepo
        const sql = yield* SqlClient.SqlClient
        const long = "é😀 \"q\" \n ".repeat(150_000)
        const transcript = { system: [], messages: [{ role: "user", content: [{ type: "text", text: long }] }] }
        const inputItems = [{ type: "message", role: "user", content: long }]
        yield* repo.save({ ...stored("resp_big", "key_a"), body: { id: "resp_big", output: [], note: long }, transcript, inputItems })
        const conversation = yield* repo.conversation("key_a", "resp_big")
        expect(conversation?.transcript).toEqual(transcript)
        expect(conversation?.inputItems).toEqual(inputItems)
        expect(conversation?.output).toEqual([])
        const found = yield* repo.find("key_a", "resp_big")
        expect(Buffer.concat(found!.body).toString()).toBe(JSON.stringify({ id: "resp_big", output: [], note: long }))
        expect(yield* repo.inputItems("key_a", "resp_big")).toEqual(inputItems)
        expect(yield* sql`SELECT count(*)::int AS n FROM staged_documents`).toEqual([{ n: 0 }])
      })), 60_000)

    it.live("stores thousands of items (a statement per ~1 MiB of them), every one findable by id", () =>
      withRepo(Effect.gen(function*() {
        const repo = yield* ResponsesRepo
        const items = Array.from({ length: 3_000 }, (_, i) => ({ id: `msg_many_${i}`, item: JSON.stringify({ id: `msg_many_${i}`, text: `${i} ${"é".repeat(1_000)}` }) }))
        yield* repo.save({ ...stored("resp_many", "key_a"), items })
        const found = yield* repo.findItems("key_a", ["msg_many_0", "msg_many_249", "msg_many_250", "msg_many_1499", "msg_many_2999"])
        expect([...found.keys()].sort()).toEqual(["msg_many_0", "msg_many_1499", "msg_many_249", "msg_many_250", "msg_many_2999"])
        expect(found.get("msg_many_2999")).toEqual(JSON.parse(items[2999]!.item))
        const sql = yield* SqlClient.SqlClient
        expect(yield* sql`SELECT count(*)::int AS n FROM stored_response_items WHERE response_id = 'resp_many'`).toEqual([{ n: 3_000 }])
      })), 60_000)

    it.live("items and responses are scoped to the key; delete takes the items with it", () =>
      withRepo(Effect.gen(function*() {
        const repo = yield* ResponsesRepo
        yield* repo.save(stored("resp_1", "key_a"))
        expect((yield* repo.findItems("key_b", ["msg_resp_1_0"])).size).toBe(0)
        expect(yield* repo.find("key_b", "resp_1")).toBeUndefined()
        expect(yield* repo.remove("key_b", "resp_1")).toBe(false)
        expect(yield* repo.remove("key_a", "resp_1")).toBe(true)
        expect((yield* repo.findItems("key_a", ["msg_resp_1_0"])).size).toBe(0)
      })), 60_000)
  })
}
