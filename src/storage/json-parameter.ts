/**
 * A JSON document as a statement's parameter, for a json, jsonb or text column. A small one goes as
 * its text. A large one (a run's input or tools, an event, a stored response's transcript: up to
 * 16 MiB) is staged first, its UTF-8 bytes made in slices and
 * written 1 MiB per statement (`staged_documents`), and the statement that stores it reads it back
 * from there and decodes it in the database. As one parameter, the SQL client encoded the whole
 * text in one turn of the event loop, and copied it into the frame twice more (~60 ms for
 * 15.5 MiB on a slow VM); one 1 MiB statement costs a few milliseconds.
 *
 * Staging and the statement that uses it must run in one transaction, with `release` after it:
 * the staged rows are then never seen by anyone else, and a failure leaves none behind.
 */
import { Effect } from "effect"
import type { SqlClient, SqlError, Statement } from "effect/sql"
import { chunksOf } from "../util/byte-chunks.ts"
import { newId } from "../util/ids.ts"
import { isLarge, jsonChunksInSlices } from "../util/sliced-stringify.ts"

/** The most bytes of a staged document in one statement. */
const STAGE_CHUNK_BYTES = 1024 * 1024

export interface JsonParameter {
  /** The parameter, cast to the column's type. */
  readonly fragment: Statement.Fragment
  /** The size of the document's JSON text in bytes (what a page's byte budget counts). */
  readonly bytes: number
  /** Removes what was staged, once the statement that used the fragment has run. */
  readonly release: Effect.Effect<void, SqlError.SqlError>
}

export const jsonParameter = (sql: SqlClient.SqlClient, value: unknown, type: "json" | "jsonb" | "text"): Effect.Effect<JsonParameter, SqlError.SqlError> => {
  const cast = sql.literal(type)
  if (!isLarge(value)) {
    const text = JSON.stringify(value)
    return Effect.succeed({ fragment: sql`${text}::${cast}`, bytes: Buffer.byteLength(text), release: Effect.void })
  }
  return Effect.gen(function*() {
    const { chunks, bytes } = yield* jsonChunksInSlices(value)
    const id = newId("doc")
    let n = 0
    for (const chunk of chunksOf(chunks, STAGE_CHUNK_BYTES)) {
      yield* sql`INSERT INTO staged_documents (id, n, data) VALUES (${id}, ${n++}, ${chunk})`
    }
    return {
      fragment: sql`(SELECT convert_from(string_agg(data, ''::bytea ORDER BY n), 'UTF8') FROM staged_documents WHERE id = ${id})::${cast}`,
      bytes,
      release: Effect.asVoid(sql`DELETE FROM staged_documents WHERE id = ${id}`)
    }
  })
}
