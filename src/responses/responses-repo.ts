/**
 * Stored responses (Responses dialect, `store: true`): the exact bytes returned, so
 * `GET /v1/responses/{id}` replays them unchanged, and the conversation so far in canonical form,
 * so `previous_response_id` can chain with only the new input items. Scoped to the key.
 */
import { Context, Effect, Layer } from "effect"
import { SqlClient, type SqlError } from "effect/sql"

export interface StoredResponse {
  readonly id: string
  readonly keyId: string
  readonly model: string
  /** The JSON body exactly as returned to the client. */
  readonly body: string
  /** Canonical system + messages of the whole conversation up to and including this response. */
  readonly transcript: unknown
  readonly createdAt: Date
}

interface Row {
  readonly id: string
  readonly key_id: string
  readonly model: string
  readonly body: string
  readonly transcript: unknown
  readonly created_at: Date
}

export class ResponsesRepo extends Context.Service<ResponsesRepo, {
  save(response: Omit<StoredResponse, "createdAt">): Effect.Effect<void, SqlError.SqlError>
  /** The stored response with this id for this key; undefined for unknown or another key's ids. */
  find(keyId: string, id: string): Effect.Effect<StoredResponse | undefined, SqlError.SqlError>
}>()("gateway/responses/ResponsesRepo") {
  static readonly layer = Layer.effect(ResponsesRepo, Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const save = Effect.fn("ResponsesRepo.save")(function*(r: Omit<StoredResponse, "createdAt">) {
      yield* sql`INSERT INTO stored_responses (id, key_id, model, body, transcript)
        VALUES (${r.id}, ${r.keyId}, ${r.model}, ${r.body}, ${JSON.stringify(r.transcript)}::jsonb)`
    })
    const find = Effect.fn("ResponsesRepo.find")(function*(keyId: string, id: string) {
      const rows = yield* sql<Row>`SELECT id, key_id, model, body, transcript, created_at FROM stored_responses
        WHERE id = ${id} AND key_id = ${keyId}`
      if (rows.length === 0) return undefined
      const row = rows[0]
      return { id: row.id, keyId: row.key_id, model: row.model, body: row.body, transcript: row.transcript, createdAt: new Date(row.created_at) }
    })
    return ResponsesRepo.of({ save, find })
  }))
}
