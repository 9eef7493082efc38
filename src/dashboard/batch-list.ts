/**
 * Batches as lists, for the dashboard: both kinds (Messages batches and OpenAI batches) of one key
 * (key holders) or of every key (operators), newest first, each with its status, request counts
 * and times. The batch APIs (`BatchesRepo`) read one kind of one key; this tells an operator which
 * key and kind own an id, so the detail and cancel go through `BatchesRepo` exactly as the API does.
 */
import { Context, Effect, Layer } from "effect"
import { SqlClient, type SqlError } from "effect/sql"
import { type BatchCounts, type BatchKind, type BatchState, messagesStatus, openaiStatus, restoreBatch } from "../../machines/batch.ts"
import type { BatchRecord } from "../batches/batches-repo.ts"
import { NotFound } from "../errors.ts"

/** One batch as the dashboard shows it, whatever its kind. */
export interface BatchListItem {
  readonly id: string
  readonly kind: BatchKind
  readonly keyId: string
  /** The owning key's name and hint, so an operator recognises it (null when the key is gone). */
  readonly key: { readonly name: string | null; readonly hint: string | null }
  readonly endpoint: string
  /** The status its own API reports (`processing_status` for Messages, `status` for OpenAI). */
  readonly status: string
  readonly ended: boolean
  readonly total: number
  readonly counts: BatchCounts
  readonly createdAt: string
  readonly endedAt: string | null
  readonly expiresAt: string
  readonly cancelInitiatedAt: string | null
}

export interface BatchListPage {
  readonly data: ReadonlyArray<BatchListItem>
  readonly hasMore: boolean
  readonly nextCursor: string | null
}

export interface BatchListQuery {
  /** Only this key's batches; every key's when undefined (operators only). */
  readonly keyId: string | undefined
  /** Only this kind; both when undefined. */
  readonly kind: BatchKind | undefined
  readonly limit: number
  /** The last id of the previous page. */
  readonly after?: string | undefined
}

const iso = (date: Date | null) => (date === null ? null : date.toISOString())

const wireStatus = (state: BatchState) => (state.kind === "messages" ? messagesStatus(state) : openaiStatus(state))

/** The dashboard's view of a batch record (from the list's SQL or from `BatchesRepo`). */
export const batchItem = (
  batch: Pick<BatchRecord, "id" | "kind" | "keyId" | "endpoint" | "state" | "createdAt" | "endedAt" | "expiresAt" | "cancelInitiatedAt">,
  key: { readonly name: string | null; readonly hint: string | null }
): BatchListItem => ({
  id: batch.id,
  kind: batch.kind,
  keyId: batch.keyId,
  key,
  endpoint: batch.endpoint,
  status: wireStatus(batch.state),
  ended: batch.state.phase === "ended",
  total: batch.state.total,
  counts: batch.state.counts,
  createdAt: batch.createdAt.toISOString(),
  endedAt: iso(batch.endedAt),
  expiresAt: batch.expiresAt.toISOString(),
  cancelInitiatedAt: iso(batch.cancelInitiatedAt)
})

interface Row {
  readonly id: string
  readonly kind: BatchKind
  readonly key_id: string
  readonly key_name: string | null
  readonly key_hint: string | null
  readonly endpoint: string
  readonly machine: unknown
  readonly created_at: Date
  readonly ended_at: Date | null
  readonly expires_at: Date
  readonly cancel_initiated_at: Date | null
}

const toItem = (row: Row) =>
  batchItem({
    id: row.id,
    kind: row.kind,
    keyId: row.key_id,
    endpoint: row.endpoint,
    state: restoreBatch(row.machine),
    createdAt: row.created_at,
    endedAt: row.ended_at,
    expiresAt: row.expires_at,
    cancelInitiatedAt: row.cancel_initiated_at
  }, { name: row.key_name, hint: row.key_hint })

const notFound = (id: string, param?: string) =>
  new NotFound({ kind: "resource", message: `No batch with id ${id}`, ...(param === undefined ? {} : { param }) })

export class BatchList extends Context.Service<BatchList, {
  list(query: BatchListQuery): Effect.Effect<BatchListPage, NotFound | SqlError.SqlError>
  /** The key and kind of a batch, for operators' views; 404 when there is none. */
  owner(batchId: string): Effect.Effect<{ readonly keyId: string; readonly kind: BatchKind }, NotFound | SqlError.SqlError>
}>()("gateway/dashboard/BatchList") {
  static readonly layer = Layer.effect(BatchList, Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient

    const list = Effect.fn("BatchList.list")(function*(query: BatchListQuery) {
      const keyId = query.keyId ?? null
      const kind = query.kind ?? null
      let before: { created_at: Date; id: string } | undefined
      if (query.after !== undefined) {
        // The cursor is an id of the same listing: another key's id is as unknown as a made-up one.
        const rows = yield* sql<{ created_at: Date; id: string }>`SELECT created_at, id FROM batches
          WHERE id = ${query.after} AND (${keyId}::text IS NULL OR key_id = ${keyId})`
        if (rows.length === 0) return yield* notFound(query.after, "after")
        before = rows[0]
      }
      const rows = yield* sql<Row>`SELECT b.id, b.kind, b.key_id, k.name AS key_name, k.hint AS key_hint, b.endpoint, b.machine,
          b.created_at, b.ended_at, b.expires_at, b.cancel_initiated_at
        FROM batches b LEFT JOIN api_keys k ON k.id = b.key_id
        WHERE (${keyId}::text IS NULL OR b.key_id = ${keyId})
          AND (${kind}::text IS NULL OR b.kind = ${kind})
          AND (${before === undefined} OR (b.created_at, b.id) < (${before?.created_at ?? new Date(0)}::timestamptz, ${before?.id ?? ""}))
        ORDER BY b.created_at DESC, b.id DESC LIMIT ${query.limit + 1}`
      const data = rows.slice(0, query.limit).map(toItem)
      const hasMore = rows.length > query.limit
      return { data, hasMore, nextCursor: hasMore ? data[data.length - 1].id : null }
    })

    const owner = Effect.fn("BatchList.owner")(function*(batchId: string) {
      const rows = yield* sql<{ key_id: string; kind: BatchKind }>`SELECT key_id, kind FROM batches WHERE id = ${batchId}`
      if (rows.length === 0) return yield* notFound(batchId)
      return { keyId: rows[0].key_id, kind: rows[0].kind }
    })

    return BatchList.of({ list, owner })
  }))
}
