/**
 * The statements that write a content's data (`artifact_chunks`, `artifact_rows`,
 * `artifact_row_search`), on any SQL client: the repository's on the event loop for small uploads,
 * the parse worker's own for large ones (`row-writer.ts`), so both write exactly the same rows.
 */
import type { SqlClient } from "effect/sql"
import type { ChunkPiece, Piece, RowsPiece } from "./row-batches.ts"

export const rowStatements = (sql: SqlClient.SqlClient) => {
  // A pending content's data is written with asynchronous commit: no statement waits for its
  // own WAL flush (an fsync per batch). Nothing is lost that matters: the version is only pointed
  // at the content by `finalize`, whose commit is synchronous and so flushes the WAL written
  // before it, rows included; a crash before that leaves a pending content, which the sweeper
  // removes. The setting is made inside the statement (an init plan run once, local to the
  // statement's own transaction), so a batch stays one round trip and no pooled connection keeps it.
  const asyncCommit = sql`(SELECT set_config('synchronous_commit', 'off', true)) IS NOT NULL`

  const insertChunk = (contentId: string, piece: ChunkPiece) =>
    sql`INSERT INTO artifact_chunks (content_id, chunk_no, bytes) SELECT ${contentId}::int8, ${piece.chunkNo}::int4, ${piece.bytes}::bytea
      WHERE ${asyncCommit}`

  // Three or four texts per batch, one line per row (`row-batches.ts`), split in SQL: one
  // statement, no per-row binding work. They are bound as UTF-8 bytes (bytea) and read as text in
  // SQL, so the client sends them as is. ROWS FROM pads a shorter list with NULLs: an originals
  // text of empty lines may come out one line short (an empty text splits into no lines).
  const lines = (bytes: Uint8Array) => sql`string_to_table(convert_from(${bytes}::bytea, 'UTF8'), chr(10))`
  const insertRows = (contentId: string, piece: RowsPiece) => {
    const search = piece.keys === undefined
      ? sql`SELECT ${contentId}::int8, ${piece.firstRow}::int4 + t.ord::int4 - 1, t.s, NULL::float8[]
          FROM ${lines(piece.search)} WITH ORDINALITY AS t(s, ord)`
      : sql`SELECT ${contentId}::int8, ${piece.firstRow}::int4 + t.ord::int4 - 1, t.s, t.n::float8[]
          FROM ROWS FROM (${lines(piece.search)}, ${lines(piece.keys)}) WITH ORDINALITY AS t(s, n, ord)`
    return sql`WITH new_rows AS (
        INSERT INTO artifact_rows (content_id, row_no, data, original)
        SELECT ${contentId}::int8, ${piece.firstRow}::int4 + t.ord::int4 - 1, t.d::jsonb, NULLIF(t.o, '')::jsonb
        FROM ROWS FROM (${lines(piece.data)}, ${lines(piece.originals)}) WITH ORDINALITY AS t(d, o, ord)
        WHERE ${asyncCommit})
      INSERT INTO artifact_row_search (content_id, row_no, search, nums) ${search}`
  }

  /** Writes one piece (a chunk of raw content or a batch of rows). */
  const insertPiece = (contentId: string, piece: Piece) =>
    piece.kind === "chunk" ? insertChunk(contentId, piece) : insertRows(contentId, piece)

  return { insertPiece }
}
