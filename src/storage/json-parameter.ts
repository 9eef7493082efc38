/**
 * A JSON document as a statement's parameter, for a json, jsonb or text column. A small one goes as
 * its text. A large one (a run's input or tools, an event, a stored response's transcript: up to
 * 16 MiB) is staged first, its UTF-8 bytes made in slices and
 * written 256 KiB per statement (`staged_documents`), and the statement that stores it reads it back
 * from there and decodes it in the database. As one parameter, the SQL client encoded the whole
 * text in one turn of the event loop, and copied it into the frame twice more (~60 ms for
 * 15.5 MiB on a slow VM); one 256 KiB statement costs a few milliseconds.
 *
 * `textParameter` does the same for a document whose text is made already (a batch's requests).
 *
 * Staging and the statement that uses it must run in one transaction, with `release` after it:
 * the staged rows are then never seen by anyone else, and a failure leaves none behind.
 */
import { Effect } from "effect"
import type { SqlClient, SqlError, Statement } from "effect/sql"
import { chunksOf } from "../util/byte-chunks.ts"
import { newId } from "../util/ids.ts"
import { isLarge, jsonChunksInSlices } from "../util/sliced-stringify.ts"
import { runInSlices, stringSlices } from "../util/slices.ts"

/**
 * The most bytes of a staged document in one statement: each is copied three or four times on its
 * way out (gathered, framed, written to the connection or the embedded database's thread), which
 * took 12–16 ms a statement at 1 MiB on a slow VM.
 */
const STAGE_CHUNK_BYTES = 256 * 1024

export interface JsonParameter {
  /** The parameter, cast to the column's type. */
  readonly fragment: Statement.Fragment
  /** The size of the document's JSON text in bytes (what a page's byte budget counts). */
  readonly bytes: number
  /** Removes what was staged, once the statement that used the fragment has run. */
  readonly release: Effect.Effect<void, SqlError.SqlError>
}

export const jsonParameter = (sql: SqlClient.SqlClient, value: unknown, type: "json" | "jsonb" | "text"): Effect.Effect<JsonParameter, SqlError.SqlError> => {
  if (!isLarge(value)) return Effect.succeed(smallJsonParameter(sql, value, type))
  return Effect.flatMap(jsonChunksInSlices(value), ({ chunks, bytes }) => staged(sql, chunks, bytes, type))
}

/**
 * A document its caller knows is small (`isLarge` said so) as its text: what `jsonParameter` gives
 * for it, without walking it again. Needs no transaction (nothing is staged).
 */
export const smallJsonParameter = (sql: SqlClient.SqlClient, value: unknown, type: "json" | "jsonb" | "text"): JsonParameter =>
  inline(sql, JSON.stringify(value), type)

/** Characters of a text parameter from which it is staged rather than sent as one parameter. */
const LARGE_TEXT_UNITS = 256 * 1024

/** Whether `textParameter` stages `text` (statements of their own) rather than sending it as one parameter. */
export const stagesText = (text: string): boolean => text.length > LARGE_TEXT_UNITS

/**
 * A JSON document's text made already (a batch's request params) as a parameter: a small one as
 * it is; a large one encoded to UTF-8 in slices and staged, as `jsonParameter` stages a value.
 */
export const textParameter = (sql: SqlClient.SqlClient, text: string, type: "json" | "jsonb" | "text"): Effect.Effect<JsonParameter, SqlError.SqlError> => {
  if (!stagesText(text)) return Effect.succeed(inline(sql, text, type))
  return Effect.flatMap(runInSlices(utf8Slices(text)), ({ chunks, bytes }) => staged(sql, chunks, bytes, type))
}

/** The UTF-8 chunks of a long text, a slice per step (`runInSlices`). */
function* utf8Slices(text: string): Generator<void, { readonly chunks: ReadonlyArray<Uint8Array>; readonly bytes: number }> {
  const chunks: Array<Uint8Array> = []
  let bytes = 0
  for (const slice of stringSlices(text)) {
    const chunk = Buffer.from(slice)
    chunks.push(chunk)
    bytes += chunk.byteLength
    yield
  }
  return { chunks, bytes }
}

const inline = (sql: SqlClient.SqlClient, text: string, type: string): JsonParameter =>
  ({ fragment: sql`${text}::${sql.literal(type)}`, bytes: Buffer.byteLength(text), release: Effect.void })

/** Writes `chunks` to `staged_documents`, STAGE_CHUNK_BYTES a statement, and gives the fragment that reads them back. */
const staged = Effect.fnUntraced(function*(sql: SqlClient.SqlClient, chunks: ReadonlyArray<Uint8Array>, bytes: number, type: string): Effect.fn.Return<JsonParameter, SqlError.SqlError> {
  const id = newId("doc")
  let n = 0
  for (const chunk of chunksOf(chunks, STAGE_CHUNK_BYTES)) {
    yield* sql`INSERT INTO staged_documents (id, n, data) VALUES (${id}, ${n++}, ${chunk})`
  }
  return {
    fragment: sql`(SELECT convert_from(string_agg(data, ''::bytea ORDER BY n), 'UTF8') FROM staged_documents WHERE id = ${id})::${sql.literal(type)}`,
    bytes,
    release: Effect.asVoid(sql`DELETE FROM staged_documents WHERE id = ${id}`)
  }
})
