/**
 * Artifacts as lists, for the dashboard. The artifact API (`Artifacts`) reads one id of one key
 * and has no list; the dashboard lists a key's artifacts (key holders) or every key's (operators),
 * newest first, each with its head version's shape, size and type, and tells an operator which key
 * owns an id so the detail and query go through `Artifacts` with that key, exactly as the API does.
 */
import { Context, Effect, Layer } from "effect"
import { SqlClient, type SqlError } from "effect/sql"
import type { Format, Shape } from "../artifacts/model.ts"
import { isArtifactId } from "../artifacts/model.ts"
import { NotFound } from "../errors.ts"

interface ArtifactListItem {
  readonly id: string
  readonly keyId: string
  /** The owning key's name and hint, so an operator recognises it (null when the key is gone). */
  readonly key: { readonly name: string | null; readonly hint: string | null }
  readonly headVersion: number
  /** Versions are numbered 1..head without gaps, so the head is also the count. */
  readonly versionCount: number
  readonly kind: Shape["kind"]
  /** Rows of a table's head version; null for text. */
  readonly rowCount: number | null
  readonly sizeBytes: number
  readonly mimeType: string
  readonly format: Format
  readonly summary: string | null
  readonly createdAt: string
  readonly updatedAt: string
}

export interface ArtifactListPage {
  readonly data: ReadonlyArray<ArtifactListItem>
  readonly hasMore: boolean
  readonly nextCursor: string | null
}

export interface ArtifactListQuery {
  /** Only this key's artifacts; every key's when undefined (operators only). */
  readonly keyId: string | undefined
  readonly limit: number
  /** The last id of the previous page. */
  readonly after?: string | undefined
}

interface Row {
  readonly id: string
  readonly key_id: string
  readonly key_name: string | null
  readonly key_hint: string | null
  readonly head_version: number
  readonly shape: Shape
  readonly format: Format
  readonly size_bytes: string
  readonly mime_type: string
  readonly summary: string | null
  readonly created_at: Date
  readonly updated_at: Date
}

const toItem = (row: Row): ArtifactListItem => ({
  id: row.id,
  keyId: row.key_id,
  key: { name: row.key_name, hint: row.key_hint },
  headVersion: row.head_version,
  versionCount: row.head_version,
  kind: row.shape.kind,
  rowCount: row.shape.kind === "table" ? row.shape.rowCount : null,
  sizeBytes: Number(row.size_bytes),
  mimeType: row.mime_type,
  format: row.format,
  summary: row.summary,
  createdAt: row.created_at.toISOString(),
  updatedAt: row.updated_at.toISOString()
})

const notFound = (id: string, param?: string) =>
  new NotFound({ kind: "resource", message: `No artifact with id ${id}`, ...(param === undefined ? {} : { param }) })

export class ArtifactList extends Context.Service<ArtifactList, {
  list(query: ArtifactListQuery): Effect.Effect<ArtifactListPage, NotFound | SqlError.SqlError>
  /** The key owning the artifact, for operators' read-only views; 404 when there is none. */
  owner(artifactId: string): Effect.Effect<string, NotFound | SqlError.SqlError>
}>()("gateway/dashboard/ArtifactList") {
  static readonly layer = Layer.effect(ArtifactList, Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient

    const list = Effect.fn("ArtifactList.list")(function*(query: ArtifactListQuery) {
      let before: { created_at: Date; id: string } | undefined
      if (query.after !== undefined) {
        // The cursor is an id of the same listing: another key's id is as unknown as a made-up one.
        const rows = isArtifactId(query.after)
          ? yield* sql<{ created_at: Date; id: string }>`SELECT created_at, id FROM artifacts
              WHERE id = ${query.after} AND (${query.keyId ?? null}::text IS NULL OR key_id = ${query.keyId ?? null})`
          : []
        if (rows.length === 0) return yield* notFound(query.after, "after")
        before = rows[0]
      }
      const rows = yield* sql<Row>`SELECT a.id, a.key_id, k.name AS key_name, k.hint AS key_hint, a.head_version,
          c.shape, c.format, c.size_bytes::text AS size_bytes, v.mime_type, v.summary, a.created_at, a.updated_at
        FROM artifacts a
        JOIN artifact_versions v ON v.artifact_id = a.id AND v.version = a.head_version
        JOIN artifact_contents c ON c.id = v.content_id
        LEFT JOIN api_keys k ON k.id = a.key_id
        WHERE (${query.keyId ?? null}::text IS NULL OR a.key_id = ${query.keyId ?? null})
          AND (${before === undefined} OR (a.created_at, a.id) < (${before?.created_at ?? new Date(0)}::timestamptz, ${before?.id ?? ""}))
        ORDER BY a.created_at DESC, a.id DESC LIMIT ${query.limit + 1}`
      const data = rows.slice(0, query.limit).map(toItem)
      const hasMore = rows.length > query.limit
      return { data, hasMore, nextCursor: hasMore ? data[data.length - 1].id : null }
    })

    const owner = Effect.fn("ArtifactList.owner")(function*(artifactId: string) {
      if (!isArtifactId(artifactId)) return yield* notFound(artifactId)
      const rows = yield* sql<{ key_id: string }>`SELECT key_id FROM artifacts WHERE id = ${artifactId}`
      if (rows.length === 0) return yield* notFound(artifactId)
      return rows[0].key_id
    })

    return ArtifactList.of({ list, owner })
  }))
}
