/**
 * Stored responses (Responses dialect, `store: true`), scoped to the key:
 *  - the exact bytes returned, so `GET /v1/responses/{id}` replays them unchanged;
 *  - the conversation so far in canonical form, so `previous_response_id` chains with only the
 *    new input items;
 *  - the answer's canonical events and echo, so `?stream=true` replays its event stream;
 *  - the input items as listed by `/input_items`, and an index of every referable item
 *    (`item_reference`).
 * JSON is stored as text (JSON.stringify escapes NUL and unpaired surrogates, which jsonb
 * refuses), so a model's answer can always be stored. Responses are kept
 * `GATEWAY_RESPONSE_RETENTION_DAYS` (default 30): an older one reads as absent at once, and an
 * hourly sweep deletes it with its items.
 */
import { Context, Effect, Layer } from "effect"
import { SqlClient, type SqlError } from "effect/sql"
import { Settings } from "../config/settings.ts"
import { storageDeadlines } from "../storage/deadline.ts"
import { insertGroups } from "../storage/insert-groups.ts"
import { type JsonParameter, jsonParameter, smallJsonParameter } from "../storage/json-parameter.ts"
import { parseStoredInSlices } from "../util/sliced-json.ts"
import { storedPieces } from "../storage/stored-pieces.ts"
import { isLarge } from "../util/sliced-stringify.ts"
import { repeatInScope } from "../util/repeated-failure.ts"

/** A stored item up to this size is read with its row and parsed at once (well under a millisecond). */
const ITEM_AT_ONCE_BYTES = 64 * 1024

export interface StoredResponse {
  readonly id: string
  readonly model: string
  /** The JSON body exactly as returned to the client, as its UTF-8 bytes in pieces (sent as they are, never decoded). */
  readonly body: ReadonlyArray<Uint8Array>
  readonly createdAt: Date
}

/** A response to store. Its documents are stored as their JSON text, made in slices when large. */
export interface NewStoredResponse {
  readonly id: string
  readonly keyId: string
  readonly model: string
  /** The body as returned to the client. */
  readonly body: unknown
  /** Canonical system + messages of the whole conversation up to and including this response. */
  readonly transcript: unknown
  /** What a streamed replay needs: the echo, the creation time and the canonical events. */
  readonly replay: unknown
  /** The listed input items. */
  readonly inputItems: ReadonlyArray<unknown>
  /** Items later requests may refer to by id, each as its wire JSON. */
  readonly items: ReadonlyArray<{ readonly id: string; readonly item: string }>
}

/** What chaining on a stored response needs, parsed. */
export interface StoredConversation {
  readonly transcript: unknown
  readonly inputItems: ReadonlyArray<unknown>
  /** The stored body's `output` items. */
  readonly output: ReadonlyArray<unknown>
}

/**
 * A stored document (up to 8 MiB of JSON text) read as its UTF-8 bytes in pieces (`storedPieces`)
 * and parsed in slices when large: read as text, it was decoded to a string and `JSON.parse`d in
 * one turn of the event loop each (a follow-up on an 8 MiB conversation held it 30–70 ms on a slow
 * VM), and read as one row of bytes, the SQL client still buffered the row in one turn.
 */
const parsedDocument = (pieces: ReadonlyArray<Uint8Array> | undefined): Effect.Effect<unknown> =>
  pieces === undefined ? Effect.succeed(null) : parseStoredInSlices(pieces)
const parsedList = (pieces: ReadonlyArray<Uint8Array> | undefined): Effect.Effect<ReadonlyArray<unknown>> =>
  Effect.map(parsedDocument(pieces), (value) => Array.isArray(value) ? value : [])

export class ResponsesRepo extends Context.Service<ResponsesRepo, {
  save(response: NewStoredResponse): Effect.Effect<void, SqlError.SqlError>
  /** The stored response with this id for this key; undefined for unknown, expired or another key's ids. */
  find(keyId: string, id: string): Effect.Effect<StoredResponse | undefined, SqlError.SqlError>
  conversation(keyId: string, id: string): Effect.Effect<StoredConversation | undefined, SqlError.SqlError>
  /** The replay record (parsed) and model of a stored response; null replay for rows stored before replays existed. */
  replay(keyId: string, id: string): Effect.Effect<{ readonly model: string; readonly replay: unknown } | undefined, SqlError.SqlError>
  inputItems(keyId: string, id: string): Effect.Effect<ReadonlyArray<unknown> | undefined, SqlError.SqlError>
  /** The caller's stored items among `ids`, parsed; ids of other keys or of expired responses are absent. */
  findItems(keyId: string, ids: ReadonlyArray<string>): Effect.Effect<ReadonlyMap<string, unknown>, SqlError.SqlError>
  /** Deletes a stored response and its items; false when there was none for this key. */
  remove(keyId: string, id: string): Effect.Effect<boolean, SqlError.SqlError>
  /** Deletes every response older than the retention; returns how many. */
  prune(): Effect.Effect<number, SqlError.SqlError>
  readonly retentionDays: number
}>()("gateway/responses/ResponsesRepo") {
  static readonly layer = Layer.effect(ResponsesRepo, Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const retentionDays = (yield* Settings).responseRetentionDays
    if (!(retentionDays > 0)) return yield* Effect.die(new Error("GATEWAY_RESPONSE_RETENTION_DAYS must be a number above 0"))
    const fresh = sql`created_at > now() - ${retentionDays}::float8 * interval '1 day'`

    /** The response's row, its documents given as parameters. */
    const responseInsert = (r: NewStoredResponse, [body, transcript, replay, inputItems]: ReadonlyArray<JsonParameter>) =>
      sql`INSERT INTO stored_responses (id, key_id, model, body, transcript, replay, input_items)
        VALUES (${r.id}, ${r.keyId}, ${r.model}, ${body!.fragment}, ${transcript!.fragment}, ${replay!.fragment}, ${inputItems!.fragment})`
    /** Its referable items from `at` to `end`. */
    const itemsInsert = (r: NewStoredResponse, at: number, end: number) => {
      const rows = r.items.slice(at, end).map((item) => ({ id: item.id, key_id: r.keyId, response_id: r.id, item: item.item }))
      return sql`INSERT INTO stored_response_items ${sql.insert(rows as unknown as readonly [Record<string, unknown>, ...Array<Record<string, unknown>>])}`
    }
    const documentsOf = (r: NewStoredResponse) => [r.body, r.transcript, r.replay, r.inputItems]

    // The transaction's body a generator made once, not an `Effect.gen(function*…)` per save: see
    // `answer` in http/chat-answer.ts.
    const insertResponse = Effect.fnUntraced(function*(r: NewStoredResponse) {
      // Up to 8 MiB each: staged a 1 MiB statement at a time when large (`jsonParameter`).
      const documents = yield* Effect.forEach(documentsOf(r), (document) => jsonParameter(sql, document, "text"))
      yield* responseInsert(r, documents)
      yield* Effect.forEach(documents, (document) => document.release, { discard: true })
      // A statement per ~1 MiB of items: thousands of them in one were encoded in one turn.
      for (const [at, end] of insertGroups(r.items, (item) => item.item.length)) yield* itemsInsert(r, at, end)
    })
    /**
     * The usual stored response (every document small, its items one statement's worth) as one
     * statement, the items' insert behind the response's in a CTE: atomic without a transaction,
     * so one round trip to the database instead of four (BEGIN, the two inserts, COMMIT). On the
     * embedded engine each is a message to the database's thread, which takes the core when it
     * wakes: a profile at 50 stored responses a second found `postMessage` the main thread's top
     * entry, ~1.5 ms a response (docs/measurements.md, 2026-12-02 evening).
     */
    const insertAtOnce = (r: NewStoredResponse) => {
      const response = responseInsert(r, documentsOf(r).map((document) => smallJsonParameter(sql, document, "text")))
      return r.items.length === 0 ? response : sql`WITH response AS (${response}) ${itemsInsert(r, 0, r.items.length)}`
    }
    const save = Effect.fn("ResponsesRepo.save")(function*(r: NewStoredResponse) {
      const groups = insertGroups(r.items, (item) => item.item.length)
      groups.next()
      const small = groups.next().done === true && documentsOf(r).every((document) => !isLarge(document))
      // Large documents are staged, and staging must share the statement's transaction.
      yield* small ? insertAtOnce(r) : sql.withTransaction(insertResponse(r))
    })

    const find = Effect.fn("ResponsesRepo.find")(function*(keyId: string, id: string) {
      const rows = yield* sql<{ id: string; model: string; created_at: Date }>`
        SELECT id, model, created_at FROM stored_responses WHERE id = ${id} AND key_id = ${keyId} AND ${fresh}`
      const row = rows[0]
      if (row === undefined) return undefined
      // In pieces (`storedPieces`); gone meanwhile (deleted) is gone.
      const body = (yield* storedPieces(sql, sql`SELECT convert_to(body, 'UTF8') AS body FROM stored_responses WHERE id = ${id}`, ["body"]))?.get("body")
      return body === undefined ? undefined : { id: row.id, model: row.model, body, createdAt: new Date(row.created_at) }
    })

    const conversation = Effect.fn("ResponsesRepo.conversation")(function*(keyId: string, id: string) {
      const pieces = yield* storedPieces(sql, sql`
        SELECT convert_to(transcript, 'UTF8') AS transcript, convert_to(input_items, 'UTF8') AS input_items, convert_to(body, 'UTF8') AS body
        FROM stored_responses WHERE id = ${id} AND key_id = ${keyId} AND ${fresh}`, ["transcript", "input_items", "body"])
      if (pieces === undefined) return undefined
      const transcript = yield* parsedDocument(pieces.get("transcript"))
      const inputItems = yield* parsedList(pieces.get("input_items"))
      const body = yield* parsedDocument(pieces.get("body"))
      const output = (body as { output?: unknown } | null)?.output
      return { transcript, inputItems, output: Array.isArray(output) ? output : [] }
    })

    const replay = Effect.fn("ResponsesRepo.replay")(function*(keyId: string, id: string) {
      const rows = yield* sql<{ model: string }>`SELECT model FROM stored_responses WHERE id = ${id} AND key_id = ${keyId} AND ${fresh}`
      const row = rows[0]
      if (row === undefined) return undefined
      // In pieces (`storedPieces`); gone meanwhile (deleted) is gone.
      const pieces = yield* storedPieces(sql, sql`SELECT convert_to(replay, 'UTF8') AS replay FROM stored_responses WHERE id = ${id}`, ["replay"])
      if (pieces === undefined) return undefined
      return { model: row.model, replay: yield* parsedDocument(pieces.get("replay")) }
    })

    const inputItems = Effect.fn("ResponsesRepo.inputItems")(function*(keyId: string, id: string) {
      const pieces = yield* storedPieces(sql, sql`
        SELECT convert_to(input_items, 'UTF8') AS input_items FROM stored_responses WHERE id = ${id} AND key_id = ${keyId} AND ${fresh}`, ["input_items"])
      return pieces === undefined ? undefined : yield* parsedList(pieces.get("input_items"))
    })

    const findItems = Effect.fn("ResponsesRepo.findItems")(function*(keyId: string, ids: ReadonlyArray<string>) {
      if (ids.length === 0) return new Map<string, unknown>()
      // A large item (a message of megabytes) is left out and read in pieces, parsed in slices.
      const rows = yield* sql<{ id: string; item: string | null }>`
        SELECT i.id, CASE WHEN octet_length(i.item) <= ${ITEM_AT_ONCE_BYTES} THEN i.item END AS item
        FROM stored_response_items i JOIN stored_responses r ON r.id = i.response_id
        WHERE i.id IN ${sql.in(ids)} AND i.key_id = ${keyId}
          AND r.created_at > now() - ${retentionDays}::float8 * interval '1 day'`
      const items = new Map<string, unknown>()
      for (const row of rows) {
        if (row.item !== null) items.set(row.id, JSON.parse(row.item))
        else {
          const pieces = yield* storedPieces(sql, sql`SELECT convert_to(item, 'UTF8') AS item FROM stored_response_items WHERE id = ${row.id}`, ["item"])
          const item = pieces?.get("item")
          if (item !== undefined) items.set(row.id, yield* parseStoredInSlices(item))
        }
      }
      return items
    })

    const remove = Effect.fn("ResponsesRepo.remove")(function*(keyId: string, id: string) {
      const rows = yield* sql`DELETE FROM stored_responses WHERE id = ${id} AND key_id = ${keyId} AND ${fresh} RETURNING id`
      return rows.length > 0
    })

    const prune = Effect.fn("ResponsesRepo.prune")(function*() {
      const rows = yield* sql`DELETE FROM stored_responses WHERE NOT (${fresh}) RETURNING id`
      return rows.length
    })

    // At start, then hourly: a stopped instance's backlog goes at its next start.
    yield* repeatInScope("responses: pruning", 3_600_000, prune())

    // Every call is made for a request (`prune` runs on its own): none may wait on a stalled
    // database without end.
    const { read, write } = yield* storageDeadlines
    return ResponsesRepo.of({
      save: (r) => write(save(r)),
      find: (keyId, id) => read(find(keyId, id)),
      conversation: (keyId, id) => read(conversation(keyId, id)),
      replay: (keyId, id) => read(replay(keyId, id)),
      inputItems: (keyId, id) => read(inputItems(keyId, id)),
      findItems: (keyId, ids) => read(findItems(keyId, ids)),
      remove: (keyId, id) => read(remove(keyId, id)),
      prune,
      retentionDays
    })
  }))
}
