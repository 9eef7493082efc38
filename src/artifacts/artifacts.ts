/**
 * The artifacts service: upload (parse once, dedupe per key, version), describe, query in the
 * database, delete. Parsing runs in `content-parser.ts`, SQL in `artifacts-repo.ts`, query
 * translation in `query-compiler.ts`; this file puts them in order.
 *
 * A background sweeper removes the data of deleted artifacts (and of uploads that died) in
 * bounded statements, so a delete answers at once whatever the artifact's size.
 */
import { Context, Effect, Exit, Latch, Layer, Semaphore, type Scope, Stream } from "effect"
import type { SqlError } from "effect/sql"
import { Settings } from "../config/settings.ts"
import { InvalidRequest, type NotFound, PayloadTooLarge } from "../errors.ts"
import { decodeWith } from "../http/body.ts"
import { StorageEngine } from "../storage/database.ts"
import { SLICE_MS } from "../util/slices.ts"
import { ArtifactsRepo, type VersionContent } from "./artifacts-repo.ts"
import { type ContentSession, openContentSession, writeTargetOf } from "./content-parser.ts"
import type { Piece } from "./row-batches.ts"
import { makeParseWorkerPool } from "./parse-worker-pool.ts"
import { DEFAULT_SOURCE, type Descriptor, formatMimeTypes, type Reference, type Shape } from "./model.ts"
import { compileRowQuery, compileTextQuery, trimToCharacters } from "./query-compiler.ts"
import { checkQuery, type QueryCheck, readVersion, type RowQuery, type TextQuery } from "./query-input.ts"
import { keyColumns } from "./row-keys.ts"
import { parseHints, UploadFields } from "./upload-fields.ts"

export interface Uploaded {
  readonly reference: Reference
  readonly deduped: boolean
}

export interface UploadBody {
  readonly stream: Stream.Stream<Uint8Array, unknown>
  /** The Content-Length header, when sent. */
  readonly declaredBytes: number | undefined
}

/** Large uploads parsing at once (each in its own worker thread, up to ~10× the content in memory). */
const MAX_PARSING_UPLOADS = 2
/** How long a parse worker is kept, warm, after its upload for the next one (`content-parser.ts`). */
const PARSE_WORKER_IDLE_MS = 60_000
/** How often the sweeper looks for deleted content when nothing woke it. */
const SWEEP_INTERVAL_MS = 60_000

const decodeFields = decodeWith(UploadFields)

const orInvalid = <A>(result: QueryCheck<A>): Effect.Effect<A, InvalidRequest> =>
  result.ok
    ? Effect.succeed(result.value)
    : Effect.fail(new InvalidRequest({ message: result.message, ...(result.param === "" ? {} : { param: result.param }) }))

export class Artifacts extends Context.Service<Artifacts, {
  upload(keyId: string, body: UploadBody): Effect.Effect<Uploaded, InvalidRequest | NotFound | PayloadTooLarge | SqlError.SqlError, Scope.Scope>
  describe(keyId: string, artifactId: string, version: number | undefined): Effect.Effect<Descriptor, InvalidRequest | NotFound | SqlError.SqlError>
  /** The `{result}` answer as JSON text (rows pass through from the database without re-parsing). */
  query(keyId: string, artifactId: string, body: unknown): Effect.Effect<string, InvalidRequest | NotFound | SqlError.SqlError>
  remove(keyId: string, artifactId: string): Effect.Effect<boolean, SqlError.SqlError>
}>()("gateway/artifacts/Artifacts") {
  static readonly layer = Layer.effect(Artifacts, Effect.gen(function*() {
    const repo = yield* ArtifactsRepo
    const settings = yield* Settings
    const engine = yield* StorageEngine
    const parsing = yield* Semaphore.make(MAX_PARSING_UPLOADS)
    const workers = makeParseWorkerPool({ max: MAX_PARSING_UPLOADS, idleMs: PARSE_WORKER_IDLE_MS })
    yield* Effect.addFinalizer(() => Effect.promise(() => workers.close()))
    // The embedded engine has one backend for every connection: smaller batches keep each insert
    // short, so other requests' statements wait little behind one.
    const batchBytes = engine.kind === "embedded" ? 16 * 1024 : 512 * 1024
    // Pieces written at once. On PostgreSQL each insert is CPU-bound in its own backend, so two on
    // two connections use both cores (README, "Artifacts"); the embedded engine has one connection.
    const writeWidth = engine.kind === "embedded" ? 1 : 2
    // A large content's parse worker writes its data on connections of its own (`row-writer.ts`).
    const writeTarget = writeTargetOf(engine, settings.databaseUrl, writeWidth, settings.storageTimeoutMs)

    const wakeSweeper = Latch.makeUnsafe(false)
    yield* Effect.forkScoped(Effect.forever(Effect.gen(function*() {
      yield* wakeSweeper.await.pipe(Effect.timeoutOption(SWEEP_INTERVAL_MS))
      wakeSweeper.closeUnsafe()
      while (yield* repo.sweepOne()) {}
    }).pipe(Effect.catch((error) => Effect.logWarning("artifacts: sweep failed, will retry", error)))))

    const tooLarge = (limitBytes: number, detail?: string) => new PayloadTooLarge({ limitBytes, ...(detail === undefined ? {} : { message: detail }) })

    const checkDeclaredRows = (declared: number | null | undefined, shape: Shape) =>
      declared !== undefined && declared !== null && shape.kind === "table" && shape.rowCount !== declared
        ? Effect.fail(new InvalidRequest({ message: `rowCount: declared ${declared} rows but the content has ${shape.rowCount}`, param: "rowCount" }))
        : Effect.void

    /**
     * A parsed content's pieces into storage (by its parse worker, or here a few at a time), then
     * `finalize`d: made once, as a generator per upload would outlive scavenges.
     */
    const writeContent = Effect.fnUntraced(function*(
      session: ContentSession,
      contentId: string,
      writes: "worker" | "main",
      finalize: (pending: string) => ReturnType<ArtifactsRepo["Service"]["finalize"]>
    ) {
      const writePiece = (piece: Piece) => repo.insertPiece(contentId, piece)
      if (writes === "worker") yield* session.store(contentId)
      for (let more = writes === "main"; more;) {
        const pieces: Array<Piece> = []
        while (pieces.length < writeWidth) {
          const piece = yield* session.next()
          if (piece === undefined) {
            more = false
            break
          }
          pieces.push(piece)
        }
        yield* Effect.forEach(pieces, writePiece, { concurrency: writeWidth, discard: true })
      }
      const done = yield* finalize(contentId)
      if (done === undefined) return yield* Effect.die(new Error("finalize: a written content was not taken"))
      return done
    })

    const upload = Effect.fn("Artifacts.upload")(function*(keyId: string, body: UploadBody) {
      const maxBody = settings.maxBodyBytes
      if (body.declaredBytes !== undefined && body.declaredBytes > maxBody) return yield* tooLarge(maxBody)
      const session = openContentSession(parsing, writeTarget, workers)
      let received = 0
      // A body that arrives faster than it is handed on (a local client) is read in slices: the
      // fiber yields to the event loop once a slice has run SLICE_MS, as a sliced JSON parse does.
      let sliceStart = performance.now()
      const yieldIfLong = Effect.suspend(() => {
        if (performance.now() - sliceStart < SLICE_MS) return Effect.void
        return Effect.andThen(Effect.yieldNow, Effect.sync(() => (sliceStart = performance.now())))
      })
      yield* Stream.runForEach(
        body.stream.pipe(Stream.mapError(() => new InvalidRequest({ message: "The request body could not be read" }))),
        (chunk) => {
          received += chunk.length
          return received > maxBody ? Effect.fail(tooLarge(maxBody)) : Effect.andThen(session.write(chunk), yieldIfLong)
        }
      )
      const envelope = yield* session.finish()
      const fields = yield* decodeFields(envelope.fields)
      if (envelope.sizeBytes > settings.artifactMaxBytes) {
        return yield* tooLarge(
          settings.artifactMaxBytes,
          `${envelope.contentField}: the content is ${envelope.sizeBytes} bytes; artifacts are limited to ${settings.artifactMaxBytes} bytes`
        )
      }
      const artifactId = fields.artifactId ?? undefined
      if (artifactId !== undefined) yield* repo.head(keyId, artifactId)
      const metaFor = (format: keyof typeof formatMimeTypes) => ({
        mimeType: fields.mimeType ?? formatMimeTypes[format],
        summary: fields.summary ?? null,
        source: fields.source ?? DEFAULT_SOURCE,
        provenance: { method: fields.provenance?.method ?? "unknown", lossless: fields.provenance?.lossless ?? false },
        declaredRowCount: fields.rowCount ?? null
      })
      const finalize = (pending: string | undefined, format: keyof typeof formatMimeTypes) =>
        repo.finalize({ keyId, sha256: envelope.sha256, pending, artifactId, meta: metaFor(format) })

      // Stored already for this key: no parse, no second copy.
      const stored = yield* repo.readyContent(keyId, envelope.sha256)
      if (stored !== undefined) {
        yield* checkDeclaredRows(fields.rowCount, stored.shape)
        const reused = yield* finalize(undefined, stored.format)
        if (reused !== undefined) return reused
      }

      const { format, shape, writes } = yield* session.parse(parseHints(fields), batchBytes)
      yield* checkDeclaredRows(fields.rowCount, shape)
      const contentId = yield* repo.createPending(keyId, envelope.sha256, envelope.sizeBytes, format, shape)
      const write = writeContent(session, contentId, writes, (pending) => finalize(pending, format))
      // A failed or interrupted upload gives its content up; the sweeper removes what was written.
      return yield* write.pipe(Effect.onExit((exit) =>
        Exit.isSuccess(exit) ? Effect.void : Effect.andThen(Effect.ignore(repo.abandon(contentId)), wakeSweeper.open)
      ))
    })

    const describe = Effect.fn("Artifacts.describe")(function*(keyId: string, artifactId: string, version: number | undefined) {
      return yield* repo.describe(keyId, artifactId, version)
    })

    const answer = (result: Record<string, unknown>, rowsJson?: string) => {
      const json = JSON.stringify({ result })
      // Rows arrive as JSON text from the database and go out as they are.
      return rowsJson === undefined ? json : `${json.slice(0, -2)},"rows":${rowsJson}}}`
    }

    const queryRows = Effect.fnUntraced(function*(content: VersionContent, query: RowQuery) {
      const shape = content.shape as Shape & { kind: "table" }
      const compiled = compileRowQuery({
        contentId: content.contentId,
        rowCount: shape.rowCount,
        columns: shape.columns,
        allColumnsListed: shape.columnCount === shape.columns.length,
        keyColumns: content.rowKeys ? keyColumns(shape.columns) : undefined
      }, query)
      const page = compiled.page === undefined ? Effect.succeed([]) : repo.run<{ row: string }>(compiled.page)
      const count = compiled.count === undefined ? Effect.succeed([{ total: compiled.knownTotal! }]) : repo.run<{ total: number }>(compiled.count)
      let rows: ReadonlyArray<{ row: string }>
      let total: number
      if (engine.kind === "postgres" || compiled.count === undefined) {
        // Two connections: the page and the count scan at the same time.
        const [r, c] = yield* Effect.all([page, count], { concurrency: 2 })
        rows = r
        total = c[0].total
      } else {
        // One connection: a page that ends before the limit already says how many matched.
        rows = yield* page
        total = query.offset === 0 && rows.length < query.limit ? rows.length : (yield* count)[0].total
      }
      return answer({
        artifactId: content.artifactId,
        version: content.version,
        totalMatched: total,
        truncated: query.offset + rows.length < total,
        structured: true
      }, `[${rows.map((r) => r.row).join(",")}]`)
    })

    const queryText = Effect.fnUntraced(function*(content: VersionContent, query: TextQuery) {
      const compiled = compileTextQuery(content.contentId, content.sizeBytes, query)
      let slice = { text: "", byteStart: compiled.start, byteEnd: compiled.start }
      if (compiled.statement !== undefined) {
        const rows = yield* repo.run<{ slice: Uint8Array | null }>(compiled.statement)
        slice = trimToCharacters(rows[0]?.slice ?? new Uint8Array(0), compiled)
      }
      return answer({
        artifactId: content.artifactId,
        version: content.version,
        text: slice.text,
        totalMatched: compiled.end - compiled.start,
        truncated: slice.byteEnd < compiled.end,
        structured: false,
        range: { byteStart: slice.byteStart, byteEnd: slice.byteEnd }
      })
    })

    const query = Effect.fn("Artifacts.query")(function*(keyId: string, artifactId: string, body: unknown) {
      const version = yield* orInvalid(readVersion(body))
      const content = yield* repo.content(keyId, artifactId, version)
      const structured = content.shape.kind === "table"
      const checked = yield* orInvalid(checkQuery(body, { structured, columns: structured ? (content.shape as Shape & { kind: "table" }).columns : [] }))
      return checked.kind === "rows" ? yield* queryRows(content, checked) : yield* queryText(content, checked)
    })

    const remove = Effect.fn("Artifacts.remove")(function*(keyId: string, artifactId: string) {
      const removed = yield* repo.remove(keyId, artifactId)
      if (removed) yield* wakeSweeper.open
      return removed
    })

    return Artifacts.of({ upload, describe, query, remove })
  }))

  /** The service with its repository. */
  static readonly layerLive = Artifacts.layer.pipe(Layer.provideMerge(ArtifactsRepo.layer))
}
