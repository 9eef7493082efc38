/** Messages between the upload (`content-parser.ts`) and its parse worker (`parse-worker.ts`). */
import type { Format, Shape } from "./model.ts"
import type { ParseHints } from "./parse-content.ts"
import type { Piece } from "./row-batches.ts"

export type ToParseWorker =
  | { readonly type: "chunk"; readonly bytes: Uint8Array }
  /** The body is complete: read the envelope. */
  | { readonly type: "end" }
  | { readonly type: "parse"; readonly hints: ParseHints; readonly batchBytes: number }
  /** One piece was written; send another. */
  | { readonly type: "ack" }

/** What the upload learns from the envelope (the content itself stays where it was parsed). */
export interface EnvelopeInfo {
  readonly fields: Record<string, unknown>
  readonly contentField: "bytes" | "content"
  readonly sizeBytes: number
  readonly sha256: string
}

export type FromParseWorker =
  | ({ readonly type: "envelope" } & EnvelopeInfo)
  /** A client error: 400 with this message (naming `param` when set). */
  | { readonly type: "invalid"; readonly param?: string | undefined; readonly message: string }
  /** The content has more rows than an artifact holds: 413. */
  | { readonly type: "too-large"; readonly message: string }
  | { readonly type: "parsed"; readonly format: Format; readonly shape: Shape }
  | { readonly type: "piece"; readonly piece: Piece }
  | { readonly type: "done" }
