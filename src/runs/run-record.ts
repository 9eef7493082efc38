/**
 * The run as stored (a `runs` row) and as shown (`{run}` in every response). Pure mapping: the
 * repositories read rows, the routes render records.
 */
import { Effect } from "effect"
import type { SqlClient, SqlError } from "effect/sql"
import { type PersistedRun, type RunStatus } from "../../machines/run.ts"
import { microsToUsd } from "../model/money.ts"
import type { Json } from "../util/json.ts"
import { PAGE_BUDGET_BYTES } from "../util/json-limits.ts"
import { parseStoredInSlices } from "../util/sliced-json.ts"
import { storedPieces } from "../storage/stored-pieces.ts"

export interface Optimization {
  readonly mode: "exact" | "auto"
  readonly allow: { readonly [key: string]: Json }
}

/**
 * A `runs` row without the documents its caller sent (`input`, `tools`, `metadata`): what the run's
 * actor and its log read on every step and every event appended. Each document may be 16 MiB; read
 * with the row, the SQL client decoded it (UTF-8, then JSON) in one turn of the event loop on every
 * read, holding every other client for the whole of it.
 */
export interface RunStateRow {
  readonly id: string
  readonly key_id: string
  readonly parent_run_id: string | null
  readonly status: string
  readonly executable: boolean
  readonly model: string | null
  readonly optimization: Optimization
  readonly node_ids: ReadonlyArray<string>
  readonly machine: PersistedRun
  readonly last_seq: string | number
  readonly budget_micros: string | number | null
  readonly spent_micros: string | number
  readonly reserved_micros: string | number
  readonly input_tokens: string | number
  readonly output_tokens: string | number
  readonly lease_owner: string | null
  readonly attempt: number
  readonly created_at: Date | string
  readonly updated_at: Date | string
  readonly finished_at: Date | string | null
}

/** The columns of a `RunStateRow`, for `SELECT` and `RETURNING`. */
export const RUN_STATE_COLUMNS = "id, key_id, parent_run_id, status, executable, model, optimization, node_ids, machine, last_seq, " +
  "budget_micros, spent_micros, reserved_micros, input_tokens, output_tokens, lease_owner, attempt, created_at, updated_at, finished_at"

/** A run as its view shows it: its state and the documents shown (the input is not). */
export interface RunRow extends RunStateRow {
  readonly tools: ReadonlyArray<Json>
  readonly metadata: { readonly [key: string]: Json }
}

/**
 * Documents (tools and metadata, `documents_bytes` together) above this size are read as their
 * text's bytes and parsed in slices: read as jsonb, the SQL client decoded and parsed 6 MB of tools
 * in one turn of the event loop (50–95 ms for a run's view on a slow VM). Run events do the same
 * (`run-log.ts`).
 */
const LARGE_DOCUMENTS_BYTES = 256 * 1024

/** A run's row as `RUN_COLUMNS` reads it: its documents as JSON when small, left out when large. */
export interface StoredRunRow extends RunStateRow {
  readonly tools: ReadonlyArray<Json> | null
  readonly metadata: { readonly [key: string]: Json } | null
  /** Whether tools and metadata were left out, to be read in pieces (`withDocuments`). */
  readonly documents_large: boolean
}

/** The columns of a `StoredRunRow` (a `RunRow` once `withDocuments` has read the large ones). */
export const RUN_COLUMNS = `${RUN_STATE_COLUMNS}, ` +
  `CASE WHEN documents_bytes > ${LARGE_DOCUMENTS_BYTES} THEN NULL ELSE tools END AS tools, ` +
  `CASE WHEN documents_bytes > ${LARGE_DOCUMENTS_BYTES} THEN NULL ELSE metadata END AS metadata, ` +
  `documents_bytes > ${LARGE_DOCUMENTS_BYTES} AS documents_large`

/** A run's documents as their JSON text's bytes, in pieces (`storedPieces`); undefined when there is no such run. */
export const runDocuments = <Column extends "input" | "tools" | "metadata">(sql: SqlClient.SqlClient, id: string, columns: ReadonlyArray<Column>) =>
  storedPieces(sql, sql`SELECT ${sql.literal(columns.map((column) => `convert_to(${column}::text, 'UTF8') AS ${column}`).join(", "))} FROM runs WHERE id = ${id}`, columns)

/** A stored row's view row, with any columns it has besides: its large documents read in pieces and parsed in slices. */
export const withDocuments = (sql: SqlClient.SqlClient) =>
<Row extends StoredRunRow>(row: Row): Effect.Effect<RunRow & Omit<Row, keyof StoredRunRow>, SqlError.SqlError> => {
  const { documents_large, ...rest } = row
  type Out = RunRow & Omit<Row, keyof StoredRunRow>
  if (!documents_large) return Effect.succeed(rest as unknown as Out)
  return Effect.map(largeDocuments(sql, row.id), ({ tools, metadata }) => ({ ...rest, tools, metadata }) as unknown as Out)
}

/** A run's tools and metadata, read in pieces and parsed in slices (made once: no generator per call). */
const largeDocuments = Effect.fnUntraced(function*(sql: SqlClient.SqlClient, id: string) {
  const pieces = yield* runDocuments(sql, id, ["tools", "metadata"])
  const [tools, metadata] = yield* Effect.all([parseStoredInSlices(pieces?.get("tools") ?? []), parseStoredInSlices(pieces?.get("metadata") ?? [])])
  return { tools, metadata }
})

/**
 * Which runs of a list's candidates (in order, up to `limit + 1` of them, each with the size of
 * what its view shows) one page takes: at most `limit`, and none more once PAGE_BUDGET_BYTES of
 * them came before (the first always comes). A page of 100 runs read all their documents in one
 * statement, up to 3.2 GB; now a page may hold fewer than `limit`, with `hasMore`, as lists may.
 */
export const pageWithin = (candidates: ReadonlyArray<{ readonly id: string; readonly documents_bytes: string | number }>, limit: number) => {
  const ids: Array<string> = []
  let bytes = 0
  for (const candidate of candidates) {
    if (ids.length === limit || (ids.length > 0 && bytes >= PAGE_BUDGET_BYTES)) break
    ids.push(candidate.id)
    bytes += Number(candidate.documents_bytes)
  }
  return { ids, hasMore: candidates.length > ids.length }
}

/** The `{run}` object of every run response. */
export interface RunView {
  readonly id: string
  readonly object: "agent_run"
  readonly status: RunStatus
  readonly executable: boolean
  readonly model: string | null
  readonly nodeIds?: ReadonlyArray<string>
  readonly metadata: { readonly [key: string]: Json }
  readonly parentRunId: string | null
  readonly budgetUsd: number | null
  readonly optimization: Optimization
  readonly tools: ReadonlyArray<Json>
  readonly usage: { readonly inputTokens: number; readonly outputTokens: number; readonly costUsd: number }
  readonly lastSeq: number
  /** Set while `requires_action`: the tool calls the caller must answer with `tool.result` events. */
  readonly requiredAction: { readonly type: "tool_results"; readonly toolCalls: ReadonlyArray<unknown> } | null
  readonly outcome: { readonly status: string; readonly reason: string | null } | null
  readonly attempt: number
  readonly createdAt: string
  readonly updatedAt: string
  readonly finishedAt: string | null
}

const iso = (d: Date | string) => new Date(d).toISOString()

export const toRunView = (row: RunRow): RunView => {
  const context = row.machine.context
  return {
    id: row.id,
    object: "agent_run",
    status: row.status as RunStatus,
    executable: row.executable,
    model: row.model,
    ...(row.executable ? { nodeIds: row.node_ids } : {}),
    metadata: row.metadata,
    parentRunId: row.parent_run_id,
    budgetUsd: row.budget_micros === null ? null : microsToUsd(Number(row.budget_micros)),
    optimization: row.optimization,
    tools: row.tools,
    usage: {
      inputTokens: Number(row.input_tokens),
      outputTokens: Number(row.output_tokens),
      costUsd: microsToUsd(Number(row.spent_micros))
    },
    lastSeq: Number(row.last_seq),
    requiredAction: row.status === "requires_action" ? { type: "tool_results", toolCalls: context.pending } : null,
    outcome: context.outcome,
    attempt: row.attempt,
    createdAt: iso(row.created_at),
    updatedAt: iso(row.updated_at),
    finishedAt: row.finished_at === null ? null : iso(row.finished_at)
  }
}

/** A stored log event as every reader sees it: its fields, its `type`, its `seq`. */
export interface LogEvent {
  readonly type: string
  readonly seq: number
  readonly [field: string]: unknown
}

export interface EventRow {
  readonly seq: string | number
  readonly type: string
  readonly data: { readonly [key: string]: unknown }
}

export const toLogEvent = (row: EventRow): LogEvent => ({ ...row.data, type: row.type, seq: Number(row.seq) })

/** Event types only the service writes on executable runs. */
export const SERVICE_EVENT_TYPES: ReadonlySet<string> = new Set(["node.started", "node.completed", "node.retry", "outcome", "run.resumed"])
