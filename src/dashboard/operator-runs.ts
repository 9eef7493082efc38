/**
 * The operator's view of runs across every key. The run API (`RunsRepo`) is scoped to one key by
 * design; the operator dashboard lists all of them, newest first, with the same cursor rule
 * (`after` = the last id of the previous page) and the same record (`toRunView`) plus its key.
 */
import { Context, Effect, Layer } from "effect"
import { SqlClient, type SqlError } from "effect/sql"
import { NotFound } from "../errors.ts"
import { pageWithin, RUN_COLUMNS, type RunRow, type RunView, type StoredRunRow, toRunView, withDocuments } from "../runs/run-record.ts"

interface OperatorRunView extends RunView {
  readonly keyId: string
  /** The key's name and hint, so an operator recognises it. */
  readonly key: { readonly name: string | null; readonly hint: string | null }
}

export interface OperatorRunPage {
  readonly data: ReadonlyArray<OperatorRunView>
  readonly hasMore: boolean
  readonly nextCursor: string | null
}

export interface OperatorRunQuery {
  readonly status?: string | undefined
  readonly keyId?: string | undefined
  readonly limit: number
  readonly after?: string | undefined
}

type KeyColumns = { readonly key_name: string | null; readonly key_hint: string | null }
type RowWithKey = RunRow & KeyColumns

const withKey = (row: RowWithKey): OperatorRunView => ({ ...toRunView(row), keyId: row.key_id, key: { name: row.key_name, hint: row.key_hint } })

export class OperatorRuns extends Context.Service<OperatorRuns, {
  list(query: OperatorRunQuery): Effect.Effect<OperatorRunPage, NotFound | SqlError.SqlError>
}>()("gateway/dashboard/OperatorRuns") {
  static readonly layer = Layer.effect(OperatorRuns, Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient

    const list = Effect.fn("OperatorRuns.list")(function*(query: OperatorRunQuery) {
      let before: { created_at: Date; id: string } | undefined
      if (query.after !== undefined) {
        const rows = yield* sql<{ created_at: Date; id: string }>`SELECT created_at, id FROM runs WHERE id = ${query.after}`
        if (rows.length === 0) return yield* new NotFound({ kind: "resource", message: `No run with id ${query.after}`, param: "after" })
        before = rows[0]
      }
      // The page's runs first (ids and sizes), then their rows: a page stops at a byte budget.
      const candidates = yield* sql<{ id: string; documents_bytes: string | number }>`SELECT id, documents_bytes FROM runs
        WHERE (${query.status ?? null}::text IS NULL OR status = ${query.status ?? null})
          AND (${query.keyId ?? null}::text IS NULL OR key_id = ${query.keyId ?? null})
          AND (${before === undefined} OR (created_at, id) < (${before?.created_at ?? new Date(0)}::timestamptz, ${before?.id ?? ""}))
        ORDER BY created_at DESC, id DESC LIMIT ${query.limit + 1}`
      const { ids, hasMore } = pageWithin(candidates, query.limit)
      const rows = ids.length === 0 ? [] : yield* sql<StoredRunRow & KeyColumns>`SELECT page.*, api_keys.name AS key_name, api_keys.hint AS key_hint
        FROM (SELECT ${sql.literal(RUN_COLUMNS)} FROM runs WHERE id IN ${sql.in(ids)}) page LEFT JOIN api_keys ON api_keys.id = page.key_id
        ORDER BY page.created_at DESC, page.id DESC`
      // The run's columns (no input: the view shows none), its large documents parsed in slices.
      const data = (yield* Effect.forEach(rows, withDocuments(sql))).map(withKey)
      return { data, hasMore, nextCursor: hasMore && data.length > 0 ? data[data.length - 1].id : null }
    })

    return OperatorRuns.of({ list })
  }))
}
