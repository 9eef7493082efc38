/**
 * A parsed content cut into the pieces the repository inserts: raw content in fixed-size chunks,
 * then rows in batches of about `batchBytes`, each batch three or four texts (rows, original cells,
 * search texts, row keys) bound as parameters of one INSERT. Pure; runs where the parse ran.
 *
 * Each text holds one line per row, split in SQL with `string_to_table(…, chr(10))`: no JSON array
 * to parse around the rows (PostgreSQL then parses each row's JSON once, as it stores it; measured
 * ~40% less than expanding one jsonb array per batch). A line never holds a raw line feed: every
 * line is JSON text (`JSON.stringify` escapes control characters), lowercased JSON text, or an
 * array literal of numbers.
 *
 * The texts travel as UTF-8 bytes: a worker hands them to the event loop without a copy and the
 * database client sends them as they are, so the event loop neither decodes nor re-encodes (nor
 * garbage-collects) megabytes of strings per upload.
 */
import { Limits } from "./model.ts"
import type { Parsed } from "./parse-content.ts"
import { keyColumns, keysLines } from "./row-keys.ts"

export interface ChunkPiece {
  readonly kind: "chunk"
  readonly chunkNo: number
  readonly bytes: Uint8Array
}

export interface RowsPiece {
  readonly kind: "rows"
  readonly firstRow: number
  readonly count: number
  /** Per row (one line each, UTF-8), its JSON text. */
  readonly data: Uint8Array
  /** Per row, the JSON object of its original cell texts, or an empty line when it has none. */
  readonly originals: Uint8Array
  /** Per row, its JSON text lowercased: what `search` matches. */
  readonly search: Uint8Array
  /** Per row, its row keys as a PostgreSQL array literal (`row-keys.ts`); absent without key columns. */
  readonly keys: Uint8Array | undefined
}

export type Piece = ChunkPiece | RowsPiece

const encoder = new TextEncoder()

/** The buffers a piece owns, to transfer it to another thread without copying. */
export const transferables = (piece: Piece): Array<ArrayBuffer> =>
  (piece.kind === "chunk" ? [piece.bytes] : [piece.data, piece.originals, piece.search, ...(piece.keys === undefined ? [] : [piece.keys])])
    .map((b) => b.buffer as ArrayBuffer)

export function* piecesOf(parsed: Parsed, content: Uint8Array, batchBytes: number): Generator<Piece> {
  for (let at = 0, chunkNo = 0; at < content.length; at += Limits.chunkBytes, chunkNo++) {
    yield { kind: "chunk", chunkNo, bytes: content.slice(at, at + Limits.chunkBytes) }
  }
  if (parsed.kind !== "table") return
  const { texts, originals, rows } = parsed
  const keys = keyColumns(parsed.shape.columns)
  const piece = (first: number, end: number): RowsPiece => {
    const batch = texts.slice(first, end)
    return {
      kind: "rows",
      firstRow: first,
      count: end - first,
      data: encoder.encode(batch.join("\n")),
      originals: encoder.encode(originals.slice(first, end).map((o) => (o === null ? "" : JSON.stringify(o))).join("\n")),
      // Lowercasing keeps line feeds out: it maps no character to one.
      search: encoder.encode(batch.join("\n").toLowerCase()),
      keys: keys.length === 0 ? undefined : encoder.encode(keysLines(rows.slice(first, end), keys))
    }
  }
  let first = 0
  let size = 0
  for (let i = 0; i < texts.length; i++) {
    size += texts[i].length
    if (size >= batchBytes) {
      yield piece(first, i + 1)
      first = i + 1
      size = 0
    }
  }
  if (first < texts.length) yield piece(first, texts.length)
}
