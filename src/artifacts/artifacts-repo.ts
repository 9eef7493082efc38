/**
 * Artifacts in SQL (migrations `0007_artifacts`, `0010_artifact_row_keys`).
 *
 * - `artifact_contents`: one row per distinct content of a key (`key_id`, `hash`), with its parse
 *   (format, shape). A content is `pending` while its rows are written, `ready` once an artifact
 *   version points at it, `deleted` when nothing does (the sweeper then removes its data).
 *   `row_keys`: its rows carry row keys (`row-keys.ts`; every content written since 0010).
 * - `artifact_chunks`: the raw content in 256 KiB chunks; `artifact_rows` (document, original
 *   cells) and `artifact_row_search` (search text, row keys `nums`): one row per record, numbered,
 *   when the content is a table.
 * - `artifacts` (id, key, head version) and `artifact_versions` (version → content + metadata).
 *
 * Writes that decide which content an artifact version points at, and deletes, run in short
 * transactions under a per-key advisory lock, so a delete and an upload of the same key never
 * race over a content. Rows are written before that, batch by batch, outside any transaction:
 * a large upload never holds a lock or (on the embedded engine) the one connection for long.
 */
import { Context, Effect, Layer } from "effect"
import { SqlClient, type SqlError } from "effect/sql"
import { InvalidRequest, NotFound } from "../errors.ts"
import { newId } from "../util/ids.ts"
import { type Descriptor, type Format, isArtifactId, Limits, type Provenance, type Reference, type Shape } from "./model.ts"
import type { SqlStatement } from "./query-compiler.ts"
import type { Piece } from "./row-batches.ts"
import { rowStatements } from "./row-sql.ts"

/** Metadata of one uploaded version. */
export interface VersionMeta {
  readonly mimeType: string
  readonly summary: string | null
  readonly source: string
  readonly provenance: Provenance
  readonly declaredRowCount: number | null
}

/** One version as a query reads it. */
export interface VersionContent {
  readonly artifactId: string
  readonly version: number
  readonly contentId: string
  readonly sizeBytes: number
  readonly format: Format
  readonly shape: Shape
  /** Whether its rows carry row keys (`row-keys.ts`): contents stored since migration 0010 do. */
  readonly rowKeys: boolean
}

export interface StoredContent {
  readonly id: string
  readonly format: Format
  readonly shape: Shape
}

export interface Finalized {
  readonly reference: Reference
  readonly deduped: boolean
}

/** Pending contents older than this belong to an upload that died with its process. */
const STALE_PENDING_MINUTES = 15
/** Rows deleted per statement by the sweeper. */
const SWEEP_BATCH_ROWS = 5_000

const notFound = (id: string) => new NotFound({ kind: "resource", message: `No artifact with id ${id}` })
const contentHash = (hex: string) => `sha256:${hex}`

export class ArtifactsRepo extends Context.Service<ArtifactsRepo, {
  /** The artifact's head version, or 404 (also for another key's id). */
  head(keyId: string, artifactId: string): Effect.Effect<number, NotFound | SqlError.SqlError>
  /** A content of the key with this hash that versions already use. */
  readyContent(keyId: string, sha256: string): Effect.Effect<StoredContent | undefined, SqlError.SqlError>
  /** Registers a content whose data is about to be written. */
  createPending(keyId: string, sha256: string, sizeBytes: number, format: Format, shape: Shape): Effect.Effect<string, SqlError.SqlError>
  /** Writes a raw chunk or a batch of rows of a pending content. */
  insertPiece(contentId: string, piece: Piece): Effect.Effect<void, SqlError.SqlError>
  /** Gives up a pending content (a failed or interrupted upload); the sweeper removes its data. */
  abandon(contentId: string): Effect.Effect<void, SqlError.SqlError>
  /**
   * Points a version at the content: `pending` (just written) or, when undefined, the key's ready
   * content with this hash — undefined when that content went away meanwhile (its last artifact
   * was deleted): the upload then stores the content itself. Identical content already stored
   * for the key dedupes (see README).
   */
  finalize(input: {
    readonly keyId: string
    readonly sha256: string
    readonly pending: string | undefined
    readonly artifactId: string | undefined
    readonly meta: VersionMeta
  }): Effect.Effect<Finalized | undefined, NotFound | SqlError.SqlError>
  describe(keyId: string, artifactId: string, version: number | undefined): Effect.Effect<Descriptor, NotFound | InvalidRequest | SqlError.SqlError>
  /** The content a query reads: the head, or `version` (400 naming it when the artifact has no such version). */
  content(keyId: string, artifactId: string, version: number | undefined): Effect.Effect<VersionContent, NotFound | InvalidRequest | SqlError.SqlError>
  /** Deletes the artifact and every version; false when the key has no such artifact. */
  remove(keyId: string, artifactId: string): Effect.Effect<boolean, SqlError.SqlError>
  /** Removes the data of one deleted (or stale pending) content; false when there is none. */
  sweepOne(): Effect.Effect<boolean, SqlError.SqlError>
  /** Runs a compiled statement (`query-compiler.ts`). */
  run<A extends object>(statement: SqlStatement): Effect.Effect<ReadonlyArray<A>, SqlError.SqlError>
}>()("gateway/artifacts/ArtifactsRepo") {
  static readonly layer = Layer.effect(ArtifactsRepo, Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient

    const lockKey = (keyId: string) => sql`SELECT pg_advisory_xact_lock(hashtextextended(${`artifacts:${keyId}`}::text, 0))`

    const head = Effect.fn("ArtifactsRepo.head")(function*(keyId: string, artifactId: string) {
      if (!isArtifactId(artifactId)) return yield* notFound(artifactId)
      const rows = yield* sql<{ head: number }>`SELECT head_version AS head FROM artifacts WHERE id = ${artifactId} AND key_id = ${keyId}`
      if (rows.length === 0) return yield* notFound(artifactId)
      return rows[0].head
    })

    const readyContent = Effect.fn("ArtifactsRepo.readyContent")(function*(keyId: string, sha256: string) {
      const rows = yield* sql<StoredContent>`SELECT id::text AS id, format, shape FROM artifact_contents
        WHERE key_id = ${keyId} AND hash = ${sha256} AND status = 'ready'`
      return rows[0] as StoredContent | undefined
    })

    const createPending = Effect.fn("ArtifactsRepo.createPending")(function*(keyId: string, sha256: string, sizeBytes: number, format: Format, shape: Shape) {
      const rows = yield* sql<{ id: string }>`INSERT INTO artifact_contents (key_id, hash, size_bytes, status, format, shape, row_keys)
        VALUES (${keyId}, ${sha256}, ${sizeBytes}, 'pending', ${format}, ${JSON.stringify(shape)}::jsonb, true) RETURNING id::text AS id`
      return rows[0].id
    })

    // A small upload's data; a large upload's parse worker writes its own with the same statements
    // on a connection of its own (`row-writer.ts`).
    const statements = rowStatements(sql)
    const insertPiece = Effect.fn("ArtifactsRepo.insertPiece")(function*(contentId: string, piece: Piece) {
      yield* statements.insertPiece(contentId, piece)
    })

    const abandon = Effect.fn("ArtifactsRepo.abandon")(function*(contentId: string) {
      yield* sql`UPDATE artifact_contents SET status = 'deleted' WHERE id = ${contentId}::int8 AND status = 'pending'`
    })

    const addVersion = Effect.fnUntraced(function*(keyId: string, artifactId: string | undefined, contentId: string, meta: VersionMeta) {
      let id = artifactId
      let version = 1
      if (id === undefined) {
        id = newId("art")
        yield* sql`INSERT INTO artifacts (id, key_id, head_version) VALUES (${id}, ${keyId}, 1)`
      } else {
        const rows = yield* sql<{ head: number }>`UPDATE artifacts SET head_version = head_version + 1, updated_at = now()
          WHERE id = ${id} RETURNING head_version AS head`
        version = rows[0].head
      }
      yield* sql`INSERT INTO artifact_versions (artifact_id, version, content_id, mime_type, summary, source, provenance, declared_row_count)
        VALUES (${id}, ${version}, ${contentId}::int8, ${meta.mimeType}, ${meta.summary}, ${meta.source},
          ${JSON.stringify(meta.provenance)}::jsonb, ${meta.declaredRowCount})`
      return { artifactId: id, version }
    })

    const finalizeLocked = Effect.fnUntraced(function*(input: Parameters<ArtifactsRepo["Service"]["finalize"]>[0]) {
      const { keyId, sha256, pending, artifactId, meta } = input
      yield* lockKey(keyId)
      let headContent: string | undefined
      if (artifactId !== undefined) {
        const rows = yield* sql<{ head: number; content: string }>`SELECT a.head_version AS head, v.content_id::text AS content
          FROM artifacts a JOIN artifact_versions v ON v.artifact_id = a.id AND v.version = a.head_version
          WHERE a.id = ${artifactId} AND a.key_id = ${keyId} FOR UPDATE OF a`
        if (rows.length === 0) {
          if (pending !== undefined) yield* abandon(pending)
          return yield* notFound(artifactId)
        }
        headContent = rows[0].content
      }
      const existing = (yield* readyContent(keyId, sha256))?.id
      let contentId: string
      if (existing !== undefined) {
        // Stored already (by an earlier upload, or a concurrent one that finished first).
        if (pending !== undefined) yield* abandon(pending)
        contentId = existing
        if (artifactId === undefined) {
          const latest = yield* sql<{ artifactId: string; version: number }>`SELECT artifact_id AS "artifactId", version
            FROM artifact_versions WHERE content_id = ${existing}::int8 ORDER BY created_at DESC, version DESC LIMIT 1`
          if (latest.length > 0) return { reference: latest[0], deduped: true }
        } else if (headContent === existing) {
          const rows = yield* sql<{ head: number }>`SELECT head_version AS head FROM artifacts WHERE id = ${artifactId}`
          return { reference: { artifactId, version: rows[0].head }, deduped: true }
        }
      } else {
        if (pending === undefined) return undefined
        const updated = yield* sql`UPDATE artifact_contents SET status = 'ready' WHERE id = ${pending}::int8 AND status = 'pending' RETURNING id`
        if (updated.length === 0) return yield* Effect.die(new Error(`content ${pending} was swept before its upload finished`))
        contentId = pending
      }
      return { reference: yield* addVersion(keyId, artifactId, contentId, meta), deduped: false }
    })

    const finalize = (input: Parameters<ArtifactsRepo["Service"]["finalize"]>[0]) =>
      sql.withTransaction(finalizeLocked(input)).pipe(Effect.withSpan("ArtifactsRepo.finalize"))

    interface VersionRow {
      readonly version: number
      readonly head: number
      readonly contentId: string
      readonly sizeBytes: string
      readonly hash: string
      readonly format: Format
      readonly shape: Shape
      readonly mimeType: string
      readonly summary: string | null
      readonly source: string
      readonly provenance: Provenance
      readonly declaredRowCount: string | null
      readonly createdAt: Date
      readonly rowKeys: boolean
    }

    const versionRow = Effect.fnUntraced(function*(keyId: string, artifactId: string, version: number | undefined) {
      // An id that cannot exist (a NUL, a stray character) is unknown without asking the database.
      if (!isArtifactId(artifactId)) return yield* notFound(artifactId)
      const rows = yield* sql<VersionRow>`SELECT v.version, a.head_version AS head, c.id::text AS "contentId",
          c.size_bytes::text AS "sizeBytes", c.hash, c.format, c.shape, v.mime_type AS "mimeType", v.summary, v.source,
          v.provenance, v.declared_row_count::text AS "declaredRowCount", v.created_at AS "createdAt",
          c.row_keys AS "rowKeys"
        FROM artifacts a
        LEFT JOIN artifact_versions v ON v.artifact_id = a.id AND v.version = COALESCE(${version ?? null}::int4, a.head_version)
        LEFT JOIN artifact_contents c ON c.id = v.content_id
        WHERE a.id = ${artifactId} AND a.key_id = ${keyId}`
      if (rows.length === 0) return yield* notFound(artifactId)
      const row = rows[0]
      if (row.version === null) {
        return yield* new InvalidRequest({
          message: `version: artifact ${artifactId} has no version ${version} (versions 1 to ${row.head})`,
          param: "version"
        })
      }
      return row
    })

    const describe = Effect.fn("ArtifactsRepo.describe")(function*(keyId: string, artifactId: string, version: number | undefined) {
      const row = yield* versionRow(keyId, artifactId, version)
      const versions = yield* sql<{ version: number; sizeBytes: string; hash: string; createdAt: Date }>`SELECT v.version,
          c.size_bytes::text AS "sizeBytes", c.hash, v.created_at AS "createdAt"
        FROM artifact_versions v JOIN artifact_contents c ON c.id = v.content_id
        WHERE v.artifact_id = ${artifactId} ORDER BY v.version DESC LIMIT ${Limits.maxListedVersions}`
      const descriptor: Descriptor = {
        artifactId,
        version: row.version,
        headVersion: row.head,
        versions: versions.map((v) => ({
          version: v.version,
          sizeBytes: Number(v.sizeBytes),
          contentHash: contentHash(v.hash),
          createdAt: v.createdAt.toISOString()
        })),
        versionCount: row.head,
        sizeBytes: Number(row.sizeBytes),
        contentHash: contentHash(row.hash),
        mimeType: row.mimeType,
        format: row.format,
        shape: row.shape,
        summary: row.summary,
        source: row.source,
        provenance: row.provenance,
        declaredRowCount: row.declaredRowCount === null ? null : Number(row.declaredRowCount),
        createdAt: row.createdAt.toISOString()
      }
      return descriptor
    })

    const content = Effect.fn("ArtifactsRepo.content")(function*(keyId: string, artifactId: string, version: number | undefined) {
      const row = yield* versionRow(keyId, artifactId, version)
      const found: VersionContent = {
        artifactId,
        version: row.version,
        contentId: row.contentId,
        sizeBytes: Number(row.sizeBytes),
        format: row.format,
        shape: row.shape,
        rowKeys: row.rowKeys
      }
      return found
    })

    const removeLocked = Effect.fnUntraced(function*(keyId: string, artifactId: string) {
      yield* lockKey(keyId)
      const contents = yield* sql<{ id: string }>`SELECT DISTINCT v.content_id::text AS id FROM artifact_versions v
        JOIN artifacts a ON a.id = v.artifact_id WHERE a.id = ${artifactId} AND a.key_id = ${keyId}`
      const deleted = yield* sql`DELETE FROM artifacts WHERE id = ${artifactId} AND key_id = ${keyId} RETURNING id`
      if (deleted.length === 0) return false
      // Versions went with the artifact (ON DELETE CASCADE); contents no version uses any more go too.
      for (const { id } of contents) {
        yield* sql`UPDATE artifact_contents c SET status = 'deleted' WHERE c.id = ${id}::int8
          AND NOT EXISTS (SELECT 1 FROM artifact_versions v WHERE v.content_id = c.id)`
      }
      return true
    })

    const remove = (keyId: string, artifactId: string) =>
      !isArtifactId(artifactId) ? Effect.succeed(false) : sql.withTransaction(removeLocked(keyId, artifactId)).pipe(Effect.withSpan("ArtifactsRepo.remove"))

    // Deletes in bounded statements (each a few milliseconds), so the embedded engine, which runs
    // SQL on the event loop, is never held long by a large artifact going away.
    const sweepOne = Effect.fn("ArtifactsRepo.sweepOne")(function*() {
      yield* sql`UPDATE artifact_contents SET status = 'deleted'
        WHERE status = 'pending' AND created_at < now() - ${`${STALE_PENDING_MINUTES} minutes`}::interval`
      const picked = yield* sql<{ id: string }>`SELECT id::text AS id FROM artifact_contents WHERE status = 'deleted' ORDER BY id LIMIT 1`
      if (picked.length === 0) return false
      const id = picked[0].id
      const bounds = yield* sql<{ top: number | null }>`SELECT max(row_no) AS top FROM artifact_rows WHERE content_id = ${id}::int8`
      const top = bounds[0]?.top ?? -1
      for (let from = 0; from <= top; from += SWEEP_BATCH_ROWS) {
        yield* sql`DELETE FROM artifact_rows WHERE content_id = ${id}::int8 AND row_no >= ${from} AND row_no < ${from + SWEEP_BATCH_ROWS}`
        yield* sql`DELETE FROM artifact_row_search WHERE content_id = ${id}::int8 AND row_no >= ${from} AND row_no < ${from + SWEEP_BATCH_ROWS}`
      }
      yield* sql`DELETE FROM artifact_row_search WHERE content_id = ${id}::int8`
      yield* sql`DELETE FROM artifact_chunks WHERE content_id = ${id}::int8`
      yield* sql`DELETE FROM artifact_contents WHERE id = ${id}::int8 AND status = 'deleted'`
      return true
    })

    const run = <A extends object>(statement: SqlStatement) => sql.unsafe<A>(statement.text, statement.params).pipe(Effect.withSpan("ArtifactsRepo.run"))

    return ArtifactsRepo.of({ head, readyContent, createPending, insertPiece, abandon, finalize, describe, content, remove, sweepOne, run })
  }))
}
