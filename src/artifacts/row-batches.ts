/**
 * A parsed content cut into the pieces the repository inserts: raw content in fixed-size chunks,
 * then rows in batches of about `batchBytes`, each batch three or four JSON texts (rows, original
 * cells, search texts, row keys) bound as parameters of one INSERT. Pure; runs where the parse ran.
 *
 * The texts travel as UTF-8 bytes: a worker hands them to the event loop without a copy and the
 * database client sends them as they are, so the event loop neither decodes nor re-encodes (nor
 * garbage-collects) megabytes of strings per upload.
 */
import { Limits } from "./model.ts"
import type { Parsed } from "./parse-content.ts"
import { keyColumns, keysJson } from "./row-keys.ts"

export interface ChunkPiece {
  readonly kind: "chunk"
  readonly chunkNo: number
  readonly bytes: Uint8Array
}

export interface RowsPiece {
  readonly kind: "rows"
  readonly firstRow: number
  readonly count: number
  /** JSON array of the rows (UTF-8). */
  readonly data: Uint8Array
  /** JSON array, per row, of its original cell texts or null (UTF-8). */
  readonly originals: Uint8Array
  /** JSON array of strings: each row's JSON text, lowercased — what `search` matches (UTF-8). */
  readonly search: Uint8Array
  /** Per row, the row keys as a PostgreSQL array literal (`row-keys.ts`); absent without key columns. */
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
      data: encoder.encode(`[${batch.join(",")}]`),
      originals: encoder.encode(JSON.stringify(originals.slice(first, end))),
      search: encoder.encode(JSON.stringify(batch.map((t) => t.toLowerCase()))),
      keys: keys.length === 0 ? undefined : encoder.encode(keysJson(rows.slice(first, end), keys))
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
