/**
 * State handles in SQL. A value is kept as its JSON text, UTF-8, in chunks of at most 1 MiB
 * (`state_chunks`), beside its head row (`states`: seq and size in bytes). A value may be 16 MiB:
 * kept in one jsonb column, it was decoded and parsed on every read, and encoded on every write,
 * each in one turn of the event loop (a read of 15.5 MiB held it 80–150 ms on a slow VM). Now a
 * read hands the stored bytes to the response as they are, never decoded or parsed, one chunk
 * per statement, all in one snapshot (REPEATABLE READ) so that an append landing meanwhile is
 * never half seen.
 *
 * An append locks the head row (`FOR UPDATE`), combines and writes back in one transaction, so
 * concurrent writers never lose a delta; `expectedSeq` turns a lost race into a 409 instead. A
 * small value is parsed and combined at once (`combine.ts`); a large array or string takes the
 * delta's elements or text onto its end without being parsed (only its last chunk is rewritten);
 * any other large value (an object) is parsed and serialized in slices.
 */
import { Context, Effect, Layer } from "effect"
import { SqlClient, type SqlError } from "effect/sql"
import { Conflict, InvalidRequest, NotFound, PayloadTooLarge } from "../errors.ts"
import { storageDeadlines } from "../storage/deadline.ts"
import { byteLengthOf, chunksOf } from "../util/byte-chunks.ts"
import { newId } from "../util/ids.ts"
import { MAX_STORED_JSON_BYTES } from "../util/json-limits.ts"
import { type Json, jsonType } from "../util/json.ts"
import { parseStoredInSlices } from "../util/sliced-json.ts"
import { jsonChunksInSlices } from "../util/sliced-stringify.ts"
import { combine, mismatchMessage } from "./combine.ts"

/** The most bytes of a value's text in one row of `state_chunks`. */
export const STATE_CHUNK_BYTES = 1024 * 1024
/** A value of up to this many bytes is parsed and combined at once (well under a millisecond). */
const SMALL_BYTES = 64 * 1024

export interface State {
  readonly stateId: string
  readonly seq: number
  /** The value's JSON text, UTF-8, in pieces (as stored, or as made): sent as it is. */
  readonly text: ReadonlyArray<Uint8Array>
  /** The text's length in bytes. */
  readonly bytes: number
}

const notFound = (id: string) => new NotFound({ kind: "resource", message: `No state with id ${id}` })
const tooLarge = () =>
  new PayloadTooLarge({
    limitBytes: MAX_STORED_JSON_BYTES,
    message: `delta: the state would grow past ${MAX_STORED_JSON_BYTES} bytes, the most one state holds`,
    param: "delta"
  })

/** A value's JSON text in pieces: made in slices when large (`JSON.stringify` of 16 MiB held the loop 170–300 ms). */
const textOf = (value: Json): Effect.Effect<ReadonlyArray<Uint8Array>> => Effect.map(jsonChunksInSlices(value), ({ chunks }) => chunks)

/** `pieces` without their first `head` and last `tail` bytes (each piece holds at least one byte). */
const trimmed = (pieces: ReadonlyArray<Uint8Array>, head: number, tail: number): ReadonlyArray<Uint8Array> =>
  pieces.map((piece, i) => piece.subarray(i === 0 ? head : 0, i === pieces.length - 1 ? piece.byteLength - tail : piece.byteLength))

/** What an append writes: the new text from chunk `from` on (the chunks before it stay). */
interface Rewrite {
  readonly from: number
  readonly tail: ReadonlyArray<Uint8Array>
}

/**
 * The stored text combined with `delta` (the rules are `combine.ts`'s). A large array or string is
 * spliced as text: `[…]` + `[d…]` is `[…,d…]`, `"…"` + `"d…"` is `"…d…"` (JSON escapes do not
 * depend on what is around them), so only the last chunk changes.
 */
const combineText = Effect.fnUntraced(function*(text: ReadonlyArray<Uint8Array>, bytes: number, delta: Json): Effect.fn.Return<Rewrite, InvalidRequest> {
  const first = text[0]![0]
  const kind = first === 0x5b ? "array" : first === 0x22 ? "string" : undefined
  if (bytes > SMALL_BYTES && kind !== undefined) {
    if (jsonType(delta) !== kind) return yield* new InvalidRequest({ message: mismatchMessage(kind, jsonType(delta)), param: "delta" })
    const last = text.length - 1
    const open = text[last]!.subarray(0, text[last]!.byteLength - 1)
    if (kind === "array") {
      if ((delta as ReadonlyArray<Json>).length === 0) return { from: last, tail: [text[last]!] }
      return { from: last, tail: [open, Buffer.from(","), ...trimmed(yield* textOf(delta), 1, 0)] }
    }
    return { from: last, tail: [open, ...trimmed(yield* textOf(delta), 1, 0)] }
  }
  const current = (yield* parseStoredInSlices(text)) as Json
  const combined = combine(current, delta)
  if (!combined.ok) return yield* new InvalidRequest({ message: combined.message, param: "delta" })
  return { from: 0, tail: yield* textOf(combined.value) }
})

export class StatesRepo extends Context.Service<StatesRepo, {
  create(keyId: string, value: Json): Effect.Effect<State, SqlError.SqlError>
  get(keyId: string, id: string): Effect.Effect<State, NotFound | SqlError.SqlError>
  append(keyId: string, id: string, delta: Json, expectedSeq: number | undefined): Effect.Effect<State, NotFound | Conflict | InvalidRequest | PayloadTooLarge | SqlError.SqlError>
}>()("gateway/states/StatesRepo") {
  static readonly layer = Layer.effect(StatesRepo, Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient

    /** Writes `tail` as the chunks from `from` on, each cut when it is reached (one statement each). */
    const writeText = Effect.fnUntraced(function*(id: string, from: number, tail: ReadonlyArray<Uint8Array>) {
      let chunkNo = from
      for (const chunk of chunksOf(tail, STATE_CHUNK_BYTES)) {
        yield* sql`INSERT INTO state_chunks (state_id, chunk_no, data) VALUES (${id}, ${chunkNo++}, ${chunk})`
      }
    })

    /** The stored text, one chunk per statement (the SQL client decodes a statement's result in one turn). */
    const readText = Effect.fnUntraced(function*(id: string, bytes: number) {
      const text: Array<Uint8Array> = []
      for (let chunkNo = 0, read = 0; read < bytes; chunkNo++) {
        const rows = yield* sql<{ data: Uint8Array }>`SELECT data FROM state_chunks WHERE state_id = ${id} AND chunk_no = ${chunkNo}`
        if (rows.length === 0) return yield* Effect.die(new Error(`state ${id}: chunk ${chunkNo} of its value is missing`))
        // A view of the client's read buffer, which it never writes over.
        text.push(rows[0].data)
        read += rows[0].data.byteLength
      }
      return text
    })

    // Transactions' bodies are generators made once, not an `Effect.gen(function*…)` per request: one
    // made per call keeps the request alive through young-generation collections (see `answer` in
    // http/chat-answer.ts).
    const insertState = Effect.fnUntraced(function*(id: string, keyId: string, bytes: number, text: ReadonlyArray<Uint8Array>) {
      yield* sql`INSERT INTO states (id, key_id, seq, bytes) VALUES (${id}, ${keyId}, 0, ${bytes})`
      yield* writeText(id, 0, text)
    })

    const create = Effect.fn("StatesRepo.create")(function*(keyId: string, value: Json) {
      const text = yield* textOf(value)
      const bytes = byteLengthOf(text)
      const id = newId("state")
      yield* sql.withTransaction(insertState(id, keyId, bytes, text))
      return { stateId: id, seq: 0, text, bytes }
    })

    const readWhole = Effect.fnUntraced(function*(keyId: string, id: string) {
      yield* sql`SET TRANSACTION ISOLATION LEVEL REPEATABLE READ`
      const heads = yield* sql<{ seq: string | number; bytes: string | number }>`SELECT seq, bytes FROM states WHERE id = ${id} AND key_id = ${keyId}`
      if (heads.length === 0) return yield* notFound(id)
      const bytes = Number(heads[0].bytes)
      return { stateId: id, seq: Number(heads[0].seq), text: yield* readText(id, bytes), bytes }
    })

    // A value in one chunk (most are) is read with its head in one statement, which is one
    // snapshot; a longer one again, head and every chunk in one REPEATABLE READ transaction, so an
    // append committed meanwhile is not seen at all.
    const get = Effect.fn("StatesRepo.get")(function*(keyId: string, id: string) {
      const rows = yield* sql<{ seq: string | number; bytes: string | number; data: Uint8Array }>`SELECT s.seq, s.bytes, c.data
        FROM states s JOIN state_chunks c ON c.state_id = s.id AND c.chunk_no = 0 WHERE s.id = ${id} AND s.key_id = ${keyId}`
      if (rows.length === 0) return yield* notFound(id)
      if (rows[0].data.byteLength === Number(rows[0].bytes)) return { stateId: id, seq: Number(rows[0].seq), text: [rows[0].data], bytes: Number(rows[0].bytes) }
      return yield* sql.withTransaction(readWhole(keyId, id))
    })

    const appendLocked = Effect.fnUntraced(function*(keyId: string, id: string, delta: Json, expectedSeq: number | undefined) {
      const rows = yield* sql<{ seq: string | number; bytes: string | number }>`SELECT seq, bytes FROM states WHERE id = ${id} AND key_id = ${keyId} FOR UPDATE`
      if (rows.length === 0) return yield* notFound(id)
      const seq = Number(rows[0].seq)
      if (expectedSeq !== undefined && expectedSeq !== seq) {
        return yield* new Conflict({
          message: `expectedSeq is ${expectedSeq} but the state is at seq ${seq}: another write landed first`,
          etag: `"${seq}"`
        })
      }
      const current = yield* readText(id, Number(rows[0].bytes))
      const { from, tail } = yield* combineText(current, Number(rows[0].bytes), delta)
      // Each delta was checked, but appends add up: the value must stay within what a state holds.
      const bytes = byteLengthOf(current.slice(0, from)) + byteLengthOf(tail)
      if (bytes > MAX_STORED_JSON_BYTES) return yield* tooLarge()
      yield* sql`DELETE FROM state_chunks WHERE state_id = ${id} AND chunk_no >= ${from}`
      yield* writeText(id, from, tail)
      yield* sql`UPDATE states SET seq = seq + 1, bytes = ${bytes}, updated_at = now() WHERE id = ${id}`
      return { stateId: id, seq: seq + 1, text: [...current.slice(0, from), ...tail], bytes }
    })
    const append = (keyId: string, id: string, delta: Json, expectedSeq: number | undefined) =>
      sql.withTransaction(appendLocked(keyId, id, delta, expectedSeq)).pipe(Effect.withSpan("StatesRepo.append"))

    // Every call is made for a request: none may wait on a stalled database without end.
    const { read, write } = yield* storageDeadlines
    return StatesRepo.of({
      create: (keyId, value) => write(create(keyId, value)),
      get: (keyId, id) => read(get(keyId, id)),
      append: (keyId, id, delta, expectedSeq) => write(append(keyId, id, delta, expectedSeq))
    })
  }))
}
