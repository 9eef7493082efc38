/**
 * Usage reports for the dashboard, summed in SQL from the usage ledger (the same rows that
 * `GET /admin/v1/usage` sums): per UTC day and model for a month, and per key for the month.
 * The ledger is flushed first, so a call that just ended is counted.
 *
 * Rows grow with days × models (at most 31 × catalog size) and with keys for the per-key
 * totals, never with requests: the sums are done by the database.
 */
import { Context, Effect, Layer } from "effect"
import { SqlClient, type SqlError } from "effect/sql"
import { UsageLedger, type UsageTotals } from "../metering/usage-ledger.ts"
import { formatUsd } from "../model/money.ts"

/** Totals as the APIs answer them (the dashboard's and the admin usage report): cost in USD. */
export const usageTotalsView = (t: UsageTotals) => ({
  requests: t.requests,
  inputTokens: t.inputTokens,
  outputTokens: t.outputTokens,
  cachedInputTokens: t.cachedInputTokens,
  reasoningTokens: t.reasoningTokens,
  costUsd: formatUsd(t.costMicros)
})

export interface DailyModelUsage extends UsageTotals {
  /** `2026-01-31` (UTC). */
  readonly day: string
  readonly model: string
}

export interface KeyUsage extends UsageTotals {
  readonly keyId: string
}

export interface ReportQuery {
  readonly from: Date
  readonly to: Date
  /** One key only; absent: every key. */
  readonly keyId?: string | undefined
}

interface SumsRow {
  readonly requests: number
  readonly input: number
  readonly output: number
  readonly cached: number
  readonly reasoning: number
  readonly cost: number
}

const totalsOf = (row: SumsRow): UsageTotals => ({
  requests: Number(row.requests),
  inputTokens: Number(row.input),
  outputTokens: Number(row.output),
  cachedInputTokens: Number(row.cached),
  reasoningTokens: Number(row.reasoning),
  costMicros: Number(row.cost)
})

export class UsageReport extends Context.Service<UsageReport, {
  /** One row per (UTC day, model) with any usage, oldest day first. */
  daily(query: ReportQuery): Effect.Effect<ReadonlyArray<DailyModelUsage>, SqlError.SqlError>
  /** One row per key with any usage in the range. */
  byKey(query: ReportQuery): Effect.Effect<ReadonlyArray<KeyUsage>, SqlError.SqlError>
}>()("gateway/dashboard/UsageReport") {
  static readonly layer = Layer.effect(UsageReport, Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const ledger = yield* UsageLedger
    const sums = sql`count(*)::float8 AS requests, sum(input_tokens)::float8 AS input, sum(output_tokens)::float8 AS output,
      sum(cached_input_tokens)::float8 AS cached, sum(reasoning_tokens)::float8 AS reasoning, sum(cost_micros)::float8 AS cost`
    const where = (query: ReportQuery) =>
      sql`at >= ${query.from.toISOString()} AND at < ${query.to.toISOString()}
        AND ${query.keyId === undefined ? sql`true` : sql`key_id = ${query.keyId}`}`

    const daily = Effect.fn("UsageReport.daily")(function*(query: ReportQuery) {
      yield* ledger.flush()
      const rows = yield* sql<SumsRow & { day: string; model: string }>`SELECT
          to_char(date_trunc('day', at AT TIME ZONE 'UTC'), 'YYYY-MM-DD') AS day, model, ${sums}
        FROM usage_ledger WHERE ${where(query)}
        GROUP BY 1, 2 ORDER BY 1, 2`
      return rows.map((row): DailyModelUsage => ({ day: row.day, model: row.model, ...totalsOf(row) }))
    })

    const byKey = Effect.fn("UsageReport.byKey")(function*(query: ReportQuery) {
      yield* ledger.flush()
      const rows = yield* sql<SumsRow & { key_id: string }>`SELECT key_id, ${sums}
        FROM usage_ledger WHERE ${where(query)}
        GROUP BY key_id ORDER BY sum(cost_micros) DESC, key_id`
      return rows.map((row): KeyUsage => ({ keyId: row.key_id, ...totalsOf(row) }))
    })

    return UsageReport.of({ daily, byKey })
  }))
}
