/**
 * Documents of one row read as their UTF-8 bytes, each in rows of at most STORED_PIECE_BYTES, in
 * order, for `parseStoredInSlices`.
 *
 * Why: the SQL client buffers a row whole, then decodes it, in one turn of the event loop: a run's
 * 15 MB input read as one row held the loop 74 ms on a slow VM (`PgProtocol.append` growing its
 * buffer), a stored response's 8 MiB documents likewise. Rows of 256 KiB are handed over a few
 * at a time (the embedded database's `PortStream`, a socket's reads on PostgreSQL).
 *
 * The row is read once (`MATERIALIZED`), each document made bytes once, then cut by byte offsets,
 * which costs nothing per piece (a text cut by characters would be walked from its start for each).
 */
import { Effect } from "effect"
import type { SqlClient, Statement } from "effect/sql"

/** The most of a document one row carries. */
export const STORED_PIECE_BYTES = 256 * 1024

/**
 * The documents `names` of the one row `source` selects (a `SELECT` whose columns are those names,
 * each bytea or null), as pieces by name; a null document has none. Undefined when there is no row.
 */
export const storedPieces = Effect.fnUntraced(function*<Name extends string>(
  sql: SqlClient.SqlClient,
  source: Statement.Fragment,
  names: ReadonlyArray<Name>
) {
  for (const name of names) if (!/^[a-z_]+$/.test(name)) throw new Error(`storedPieces: not a column name: ${name}`)
  // A name no document has marks that the row exists (an empty piece), whatever its documents are.
  const values = sql.literal([`('', ''::bytea)`, ...names.map((name) => `('${name}', s."${name}")`)].join(", "))
  const rows = yield* sql<{ name: Name | ""; piece: Uint8Array }>`WITH s AS MATERIALIZED (${source})
    SELECT v.name, substring(v.b FROM i * ${STORED_PIECE_BYTES} + 1 FOR ${STORED_PIECE_BYTES}) AS piece
    FROM s, LATERAL (VALUES ${values}) AS v(name, b),
      generate_series(0, greatest(octet_length(v.b) - 1, 0) / ${STORED_PIECE_BYTES}) AS i
    WHERE v.b IS NOT NULL ORDER BY v.name, i`
  if (rows.length === 0) return undefined
  const pieces = new Map<Name, Array<Uint8Array>>()
  for (const row of rows) {
    if (row.name === "") continue
    const list = pieces.get(row.name)
    if (list === undefined) pieces.set(row.name, [row.piece])
    else list.push(row.piece)
  }
  return pieces as ReadonlyMap<Name, ReadonlyArray<Uint8Array>>
})
