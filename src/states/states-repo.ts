/**
 * State handles in SQL. An append locks the row (`FOR UPDATE`), combines in process and writes
 * back in one transaction, so concurrent writers never lose a delta; `expectedSeq` turns a lost
 * race into a 409 instead.
 */
import { Context, Effect, Layer } from "effect"
import { SqlClient, type SqlError } from "effect/sql"
import { Conflict, InvalidRequest, NotFound, PayloadTooLarge } from "../errors.ts"
import { newId } from "../util/ids.ts"
import { findUnstorableInSlices, MAX_STORED_JSON_BYTES } from "../util/json-limits.ts"
import type { Json } from "../util/json.ts"
import { jsonTextInSlices } from "../util/sliced-stringify.ts"
import { combine } from "./combine.ts"

export interface State {
  readonly stateId: string
  readonly seq: number
  readonly value: Json
}

interface StateRow {
  readonly id: string
  readonly seq: string | number
  readonly value: Json
}

const toState = (row: StateRow): State => ({ stateId: row.id, seq: Number(row.seq), value: row.value })
const notFound = (id: string) => new NotFound({ kind: "resource", message: `No state with id ${id}` })

export class StatesRepo extends Context.Service<StatesRepo, {
  create(keyId: string, value: Json): Effect.Effect<State, SqlError.SqlError>
  get(keyId: string, id: string): Effect.Effect<State, NotFound | SqlError.SqlError>
  append(keyId: string, id: string, delta: Json, expectedSeq: number | undefined): Effect.Effect<State, NotFound | Conflict | InvalidRequest | PayloadTooLarge | SqlError.SqlError>
}>()("gateway/states/StatesRepo") {
  static readonly layer = Layer.effect(StatesRepo, Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    // jsonb parameters go in as text so every JSON type (including bare strings) round-trips. A
    // value may be 16 MiB: its text is made in slices, and a write does not read it back (the
    // caller has it; jsonb keeps its keys in an order of its own, which only reads show).
    const asJsonb = (value: Json) => jsonTextInSlices(value)

    const create = Effect.fn("StatesRepo.create")(function*(keyId: string, value: Json) {
      const rows = yield* sql<{ id: string; seq: string | number }>`INSERT INTO states (id, key_id, seq, value)
        VALUES (${newId("state")}, ${keyId}, 0, ${yield* asJsonb(value)}::jsonb) RETURNING id, seq`
      return toState({ ...rows[0], value })
    })

    const get = Effect.fn("StatesRepo.get")(function*(keyId: string, id: string) {
      const rows = yield* sql<StateRow>`SELECT id, seq, value FROM states WHERE id = ${id} AND key_id = ${keyId}`
      if (rows.length === 0) return yield* notFound(id)
      return toState(rows[0])
    })

    const append = (keyId: string, id: string, delta: Json, expectedSeq: number | undefined) =>
      sql.withTransaction(Effect.gen(function*() {
        const rows = yield* sql<StateRow>`SELECT id, seq, value FROM states WHERE id = ${id} AND key_id = ${keyId} FOR UPDATE`
        if (rows.length === 0) return yield* notFound(id)
        const current = toState(rows[0])
        if (expectedSeq !== undefined && expectedSeq !== current.seq) {
          return yield* new Conflict({
            message: `expectedSeq is ${expectedSeq} but the state is at seq ${current.seq}: another write landed first`,
            etag: `"${current.seq}"`
          })
        }
        const combined = combine(current.value, delta)
        if (!combined.ok) return yield* new InvalidRequest({ message: combined.message, param: "delta" })
        // Each delta was checked, but appends add up: a sum can overflow to Infinity, and the value
        // must stay within what one row holds (checked in slices: the value may be 16 MiB).
        const grown = yield* findUnstorableInSlices(combined.value)
        if (grown?.kind === "size") {
          return yield* new PayloadTooLarge({
            limitBytes: MAX_STORED_JSON_BYTES,
            message: `delta: the state would grow past ${MAX_STORED_JSON_BYTES} bytes, the most one state holds`,
            param: "delta"
          })
        }
        if (grown !== undefined) return yield* new InvalidRequest({ message: "delta: the combined value is a number out of range", param: "delta" })
        const updated = yield* sql<{ id: string; seq: string | number }>`UPDATE states SET value = ${yield* asJsonb(combined.value)}::jsonb, seq = seq + 1, updated_at = now()
          WHERE id = ${id} RETURNING id, seq`
        return toState({ ...updated[0], value: combined.value })
      })).pipe(Effect.withSpan("StatesRepo.append"))

    return StatesRepo.of({ create, get, append })
  }))
}
