/** Messages between the upload (`content-parser.ts`) and its parse worker (`parse-worker.ts`). */
import type { MessagePort } from "node:worker_threads"
import type { ConnectionGuards } from "../storage/pg-connection.ts"
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
  /** After `parsed` with `writes: "worker"`: write the content's data under this id. */
  | { readonly type: "store"; readonly contentId: string }
  /** The upload was interrupted: cancel the statements running, then answer `store-failed`. */
  | { readonly type: "stop" }
  /** The upload is over: forget it and answer `reset-done`, to be kept for the next one (no answer while a write runs). */
  | { readonly type: "reset" }

/**
 * Where a parse worker writes a large content's data itself (`row-writer.ts`): a connection of its
 * own, so megabytes of statements are never encoded on the event loop.
 */
export type WriteTarget = WriteTargetConnection & {
  /**
   * Contents from this size on are written by the worker (default `WORKER_WRITES_MIN_BYTES`). The
   * server keeps the default; tests lower it, so the worker's writes are checked on a content a
   * few times smaller (the same code runs: only the row count differs).
   */
  readonly minBytes?: number
}

type WriteTargetConnection =
  | {
    readonly kind: "postgres"
    readonly url: string
    /** Statements at once (connections). */
    readonly width: number
    readonly maxMessageSize: number
    /** Keepalive and the answer deadline, as the gateway's own pool has them (`storage/pg-connection.ts`). */
    readonly guards: ConnectionGuards
    /**
     * How long a connection may take to open, unless the URL says (`connect_timeout`): the storage
     * timeout, not the client's 5 s. The worker connects while it reads and parses the upload on
     * the same thread, on a machine busy with the request's other work; a clean full test run on
     * a loaded 2-core VM saw one upload fail with "Connection timed out" (2026-12-01).
     */
    readonly connectTimeoutMs?: number
  }
  /** A connection to the embedded database worker (`storage/port-stream.ts`), transferred to the parse worker. */
  | { readonly kind: "embedded"; readonly port: MessagePort; readonly maxMessageSize: number }

/**
 * Contents from this size on are written by the worker when it has a target; smaller ones by the
 * event loop (a few megabytes of garbage at most, and no ~0.2 s of loading the writer).
 */
export const WORKER_WRITES_MIN_BYTES = 1024 * 1024

export interface ParseWorkerData {
  readonly target: WriteTarget | undefined
}

/** A failed write, as the worker reports it: the SQLSTATE (when the server sent one) and the message. */
export interface WriteFailure {
  readonly code: string | undefined
  readonly message: string
}

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
  /** `writes`: who writes the data: the event loop (pieces follow) or the worker (after `store`). */
  | { readonly type: "parsed"; readonly format: Format; readonly shape: Shape; readonly writes: "main" | "worker" }
  | { readonly type: "piece"; readonly piece: Piece }
  | { readonly type: "done" }
  | { readonly type: "stored" }
  | { readonly type: "reset-done" }
  | ({ readonly type: "store-failed" } & WriteFailure)
