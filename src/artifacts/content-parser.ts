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

/** Hands a body chunk to the session's worker. */
const toWorker = (link: WorkerLink, chunk: Uint8Array) => {
  // Copy into a buffer of its own: a socket chunk may share its memory with other chunks (and a
  // Buffer's `slice` would not copy).
  const own = new Uint8Array(chunk)
  link.post({ type: "chunk", bytes: own }, [own.buffer as ArrayBuffer])
}

/** Feeds a body chunk: buffered until it passes INLINE_MAX_BYTES, then to a parse worker. */
const writeChunk = Effect.fnUntraced(function*(s: Session, chunk: Uint8Array) {
  if (s.worker !== undefined) return toWorker(s.worker, chunk)
  s.buffered.push(chunk)
  s.bufferedBytes += chunk.length
  if (s.bufferedBytes <= INLINE_MAX_BYTES) return
  const link = yield* spawnWorker(s.permits, s.target, s.pool)
  s.worker = link
  for (const c of s.buffered) toWorker(link, c)
  s.buffered = []
})

/** The body is complete: its envelope, read here or by the worker. */
const finishBody = Effect.fnUntraced(function*(s: Session) {
  if (s.worker === undefined) {
    const read = readEnvelope(concatChunks(s.buffered))
    s.buffered = []
    if (isEnvelopeError(read)) return yield* invalid(read.param, read.message)
    s.envelope = read
    return { fields: read.fields, contentField: read.contentField, sizeBytes: read.bytes.length, sha256: read.sha256 }
  }
  s.worker.post({ type: "end" })
  const reply = yield* s.worker.take
  if (reply.type === "invalid") return yield* invalid(reply.param, reply.message)
  if (reply.type !== "envelope") return yield* unexpected(reply)
  const { type: _, ...info } = reply
  return info
})

/** Parses the content, here (small) or in the worker. */
const parseBody = Effect.fnUntraced(function*(s: Session, hints: ParseHints, batchBytes: number) {
  if (s.worker === undefined) {
    const e = s.envelope!
    try {
      const parsed = parseContent(e.text, e.bytes.length, hints, e.value)
      s.pieces = piecesOf(parsed, e.bytes, batchBytes)
      return { format: parsed.format, shape: parsed.shape, writes: "main" as const }
    } catch (error) {
      if (!(error instanceof ContentParseError)) throw error
      return yield* failed(parseFailure(error, e.contentField))
    }
  }
  s.worker.post({ type: "parse", hints, batchBytes })
  const reply = yield* s.worker.take
  if (reply.type === "invalid" || reply.type === "too-large") return yield* failed(reply)
  if (reply.type !== "parsed") return yield* unexpected(reply)
  return { format: reply.format, shape: reply.shape, writes: reply.writes }
})

/** The next piece to write (acknowledging the last one, in worker mode). */
const nextPiece = Effect.fnUntraced(function*(s: Session) {
  if (s.worker === undefined) {
    const next = s.pieces!.next()
    return next.done ? undefined : next.value
  }
  if (s.pending) s.worker.post({ type: "ack" })
  const reply = yield* s.worker.take
  if (reply.type === "done") {
    s.pending = false
    return undefined
  }
  if (reply.type !== "piece") return yield* unexpected(reply)
  s.pending = true
  return reply.piece
})

/** The worker writes the content's pieces itself. */
const storeInWorker = Effect.fnUntraced(function*(s: Session, contentId: string) {
  if (s.worker === undefined) return yield* Effect.die(new Error("store: a content parsed on the event loop"))
  const link = s.worker
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

/**
 * A session's state. Its steps are module-level generators taking it (`writeChunk` …): a
 * `function*` written per session would be a generator closure per upload, which V8 keeps (with
 * the upload) through young-generation collections.
 */
class Session implements ContentSession {
  buffered: Array<Uint8Array> = []
  bufferedBytes = 0
  worker: WorkerLink | undefined
  // Inline mode state.
  envelope: Envelope | undefined
  pieces: Generator<Piece> | undefined
  // Worker mode: whether a piece was handed out and not yet acknowledged.
  pending = false
  readonly permits: Semaphore.Semaphore
  readonly target: (() => WriteTarget | undefined) | undefined
  readonly pool: ParseWorkerPool | undefined
  constructor(permits: Semaphore.Semaphore, target: (() => WriteTarget | undefined) | undefined, pool: ParseWorkerPool | undefined) {
    this.permits = permits
    this.target = target
    this.pool = pool
  }
  write(chunk: Uint8Array) {
    return writeChunk(this, chunk)
  }
  finish() {
    return finishBody(this)
  }
  parse(hints: ParseHints, batchBytes: number) {
    return parseBody(this, hints, batchBytes)
  }
  next() {
    return nextPiece(this)
  }
  store(contentId: string) {
    return storeInWorker(this, contentId)
  }
}

/**
 * `target`: where a worker may write a large content itself, made when one starts (none: every
 * piece comes back here); `pool`: where workers wait between uploads (none: one per upload).
 */
export const openContentSession = (
  permits: Semaphore.Semaphore,
  target?: () => WriteTarget | undefined,
  pool?: ParseWorkerPool
): ContentSession => new Session(permits, target, pool)
