/**
 * The operator's view of runs across every key. The run API (`RunsRepo`) is scoped to one key by
 * design; the operator dashboard lists all of them, newest first, with the same cursor rule
 * (`after` = the last id of the previous page) and the same record (`toRunView`) plus its key.
 */
import { Context, Effect, Layer } from "effect"
import { SqlClient, type SqlError } from "effect/sql"
import { NotFound } from "../errors.ts"
import { type RunRow, type RunView, toRunView } from "../runs/run-record.ts"

export interface OperatorRunView extends RunView {
  readonly keyId: string
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

const withKey = (row: RunRow): OperatorRunView => ({ ...toRunView(row), keyId: row.key_id })

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
      const rows = yield* sql<RunRow>`SELECT * FROM runs
        WHERE (${query.status ?? null}::text IS NULL OR status = ${query.status ?? null})
          AND (${query.keyId ?? null}::text IS NULL OR key_id = ${query.keyId ?? null})
          AND (${before === undefined} OR (created_at, id) < (${before?.created_at ?? new Date(0)}::timestamptz, ${before?.id ?? ""}))
        ORDER BY created_at DESC, id DESC LIMIT ${query.limit + 1}`
      const data = rows.slice(0, query.limit).map(withKey)
      const hasMore = rows.length > query.limit
      return { data, hasMore, nextCursor: hasMore ? data[data.length - 1].id : null }
    })

    return OperatorRuns.of({ list })
  }))
}
