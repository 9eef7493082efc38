/**
 * Where an upload's CPU work runs. A small body (up to 64 KiB: well under a millisecond of
 * parsing) is read on the event loop; a larger one streams, as it arrives, into a worker thread
 * that reads the envelope, hashes, parses and serializes the rows, so no upload holds the event
 * loop whatever its size. Both run the same pure functions (`envelope.ts`, `parse-content.ts`,
 * `row-batches.ts`); the upload sees one interface. A large content's rows are also written by
 * the worker, on connections of its own (`row-writer.ts`); smaller ones come back in pieces for
 * the upload to write. Workers are kept between uploads (`parse-worker-pool.ts`).
 */
import { Effect, Redacted, type Scope, type Semaphore } from "effect"
import { SqlError, UnknownError } from "effect/sql/SqlError"
import { InvalidRequest, PayloadTooLarge } from "../errors.ts"
import type { StorageEngine } from "../storage/database.ts"
import { connectionGuards } from "../storage/pg-connection.ts"
import { MAX_SQL_MESSAGE_BYTES } from "../util/json-limits.ts"
import { concatChunks, type Envelope, isEnvelopeError, readEnvelope } from "./envelope.ts"
import type { Format, Shape } from "./model.ts"
import { ContentParseError, type ParseHints, parseContent, parseFailure } from "./parse-content.ts"
import { type Piece, piecesOf } from "./row-batches.ts"
import { type ParseWorkerPool, spawnWorker, type WorkerLink } from "./parse-worker-pool.ts"
import type { EnvelopeInfo, FromParseWorker, WriteFailure, WriteTarget } from "./worker-protocol.ts"

/** Bodies up to this size are parsed on the event loop. */
export const INLINE_MAX_BYTES = 64 * 1024

/** How long an interrupted upload waits for its worker to cancel its statements (the driver's own bound is 5 s). */
const STOP_TIMEOUT_MS = 10_000

export interface ContentSession {
  /** Feeds the next body chunk. */
  write(chunk: Uint8Array): Effect.Effect<void, never, Scope.Scope>
  /** The body is complete: what its envelope says (400 when it is not a valid upload body). */
  finish(): Effect.Effect<EnvelopeInfo, InvalidRequest, Scope.Scope>
  /**
   * Parses the content (400 when it does not fit its declared format, 413 past the row limit).
   * `writes`: "main" when the caller writes the pieces (`next`), "worker" when `store` does.
   */
  parse(hints: ParseHints, batchBytes: number): Effect.Effect<ParseResult, InvalidRequest | PayloadTooLarge>
  /** The next piece to write, or undefined at the end. Asking for it acknowledges the previous one. */
  next(): Effect.Effect<Piece | undefined>
  /** After `parse` said "worker": the worker writes every piece of the content `contentId`. */
  store(contentId: string): Effect.Effect<void, SqlError>
}

interface ParseResult {
  readonly format: Format
  readonly shape: Shape
  readonly writes: "main" | "worker"
}

const invalid = (param: string | undefined, message: string) => new InvalidRequest({ message, ...(param === undefined ? {} : { param }) })

const failed = (reply: FromParseWorker & { type: "invalid" | "too-large" }) =>
  reply.type === "too-large"
    ? new PayloadTooLarge({ limitBytes: 0, message: reply.message }) // the limit is on rows; the detail says so
    : invalid(reply.param, reply.message)

/** A write that failed in the worker, as the SqlError it was there (its SQLSTATE decides the answer: `http/app.ts`). */
const writeFailed = (failure: WriteFailure) =>
  new SqlError({
    reason: new UnknownError({
      cause: Object.assign(new Error(failure.message), failure.code === undefined ? {} : { code: failure.code }),
      message: failure.message,
      operation: "artifact upload (parse worker)"
    })
  })

const unexpected = (message: FromParseWorker) => Effect.die(new Error(`parse worker: unexpected ${message.type}`))

/**
 * Where a large content's parse worker writes: PostgreSQL at the gateway's URL on `width`
 * connections, or a new connection to the embedded database (made when the worker starts).
 */
export const writeTargetOf = (engine: StorageEngine["Service"], databaseUrl: Redacted.Redacted<string> | undefined, width: number, storageTimeoutMs: number) =>
(): WriteTarget | undefined => {
  if (engine.kind === "postgres") {
    return databaseUrl === undefined
      ? undefined
      : {
        kind: "postgres",
        url: Redacted.value(databaseUrl),
        width,
        maxMessageSize: MAX_SQL_MESSAGE_BYTES,
        guards: connectionGuards(storageTimeoutMs),
        ...(/[?&]connect_timeout=/.test(Redacted.value(databaseUrl)) ? {} : { connectTimeoutMs: storageTimeoutMs })
      }
  }
  const port = engine.openPort?.()
  return port === undefined ? undefined : { kind: "embedded", port, maxMessageSize: MAX_SQL_MESSAGE_BYTES }
}

/**
 * `target`: where a worker may write a large content itself, made when one starts (none: every
 * piece comes back here); `pool`: where workers wait between uploads (none: one per upload).
 */
export const openContentSession = (
  permits: Semaphore.Semaphore,
  target?: () => WriteTarget | undefined,
  pool?: ParseWorkerPool
): ContentSession => {
  let buffered: Array<Uint8Array> = []
  let bufferedBytes = 0
  let worker: WorkerLink | undefined
  // Inline mode state.
  let envelope: Envelope | undefined
  let pieces: Generator<Piece> | undefined
  // Worker mode: whether a piece was handed out and not yet acknowledged.
  let pending = false

  const toWorker = (link: WorkerLink, chunk: Uint8Array) => {
    // Copy into a buffer of its own: a socket chunk may share its memory with other chunks (and a
    // Buffer's `slice` would not copy).
    const own = new Uint8Array(chunk)
    link.post({ type: "chunk", bytes: own }, [own.buffer as ArrayBuffer])
  }

  return {
    write: (chunk) =>
      Effect.gen(function*() {
        if (worker !== undefined) return toWorker(worker, chunk)
        buffered.push(chunk)
        bufferedBytes += chunk.length
        if (bufferedBytes <= INLINE_MAX_BYTES) return
        const link = yield* spawnWorker(permits, target, pool)
        worker = link
        for (const c of buffered) toWorker(link, c)
        buffered = []
      }),

    finish: () =>
      Effect.gen(function*() {
        if (worker === undefined) {
          const read = readEnvelope(concatChunks(buffered))
          buffered = []
          if (isEnvelopeError(read)) return yield* invalid(read.param, read.message)
          envelope = read
          return { fields: read.fields, contentField: read.contentField, sizeBytes: read.bytes.length, sha256: read.sha256 }
        }
        worker.post({ type: "end" })
        const reply = yield* worker.take
        if (reply.type === "invalid") return yield* invalid(reply.param, reply.message)
        if (reply.type !== "envelope") return yield* unexpected(reply)
        const { type: _, ...info } = reply
        return info
      }),

    parse: (hints, batchBytes) =>
      Effect.gen(function*() {
        if (worker === undefined) {
          const e = envelope!
          try {
            const parsed = parseContent(e.text, e.bytes.length, hints, e.value)
            pieces = piecesOf(parsed, e.bytes, batchBytes)
            return { format: parsed.format, shape: parsed.shape, writes: "main" as const }
          } catch (error) {
            if (!(error instanceof ContentParseError)) throw error
            return yield* failed(parseFailure(error, e.contentField))
          }
        }
        worker.post({ type: "parse", hints, batchBytes })
        const reply = yield* worker.take
        if (reply.type === "invalid" || reply.type === "too-large") return yield* failed(reply)
        if (reply.type !== "parsed") return yield* unexpected(reply)
        return { format: reply.format, shape: reply.shape, writes: reply.writes }
      }),

    next: () =>
      Effect.gen(function*() {
        if (worker === undefined) {
          const next = pieces!.next()
          return next.done ? undefined : next.value
        }
        if (pending) worker.post({ type: "ack" })
        const reply = yield* worker.take
        if (reply.type === "done") {
          pending = false
          return undefined
        }
        if (reply.type !== "piece") return yield* unexpected(reply)
        pending = true
        return reply.piece
      }),

    store: (contentId) =>
      Effect.gen(function*() {
        if (worker === undefined) return yield* Effect.die(new Error("store: a content parsed on the event loop"))
        const link = worker
        link.post({ type: "store", contentId })
        // Interrupted (the client went away): the worker's statements are cancelled before the
        // upload gives its content up, so the sweeper never races a write still running.
        const reply = yield* link.take.pipe(Effect.onInterrupt(() => {
          link.post({ type: "stop" })
          return Effect.ignore(Effect.timeoutOption(link.take, STOP_TIMEOUT_MS))
        }))
        if (reply.type === "store-failed") {
          link.discard()
          return yield* writeFailed(reply)
        }
        if (reply.type !== "stored") return yield* unexpected(reply)
      })
  }
}
