/**
 * Runs in SQL: create (with its idempotency key in the same transaction), read, list, cancel.
 * Every method takes the key id: another key's run does not exist (404).
 */
import { Context, Effect, Layer } from "effect"
import { SqlClient, type SqlError } from "effect/sql"
import { isTerminal, persistRun, startRun } from "../../machines/run.ts"
import { NotFound, Unprocessable } from "../errors.ts"
import { newId } from "../util/ids.ts"
import { jsonParameter } from "../storage/json-parameter.ts"
import { RunLog } from "./run-log.ts"
import { type Optimization, pageWithin, RUN_COLUMNS, RUN_STATE_COLUMNS, type RunRow, type RunStateRow, type RunView, type StoredRunRow, runDocuments, toRunView, withDocuments } from "./run-record.ts"
import type { Json } from "../util/json.ts"
import { parseStoredInSlices } from "../util/sliced-json.ts"

/** How long an idempotency key is remembered (spec: 24 hours). */
const IDEMPOTENCY_TTL_HOURS = 24

export interface NewRun {
  readonly executable: boolean
  readonly model: string | null
  readonly input: Json
  readonly tools: ReadonlyArray<Json>
  readonly optimization: Optimization
  readonly metadata: { readonly [key: string]: Json }
  readonly parentRunId: string | null
  readonly budgetMicros: number | null
  /** Executable runs start leased by the instance that will execute them. */
  readonly lease?: { readonly owner: string; readonly ttlMs: number }
}

export interface Idempotency {
  readonly key: string
  /** Hash of the request body: the same key with another body is refused (422). */
  readonly requestHash: string
}

export interface Rendered {
  readonly status: number
  readonly body: unknown
}

export type Created =
  | { readonly _tag: "Created"; readonly run: RunView; readonly response: Rendered }
  | { readonly _tag: "Replayed"; readonly response: Rendered }

export interface ListQuery {
  readonly status?: string
  readonly parentRunId?: string
  readonly limit: number
  /** A run id: list runs created before it (the `nextCursor` of the previous page). */
  readonly after?: string
}

export interface RunPage {
  readonly data: ReadonlyArray<RunView>
  readonly hasMore: boolean
  readonly nextCursor: string | null
}

/** The first row's view row, its large documents read in pieces, if there is one. */
const firstWithDocuments = (sql: SqlClient.SqlClient) => (rows: ReadonlyArray<StoredRunRow>): Effect.Effect<RunRow | undefined, SqlError.SqlError> =>
  rows[0] === undefined ? Effect.succeed(undefined) : withDocuments(sql)(rows[0])

const notFound = (id: string, param?: string) =>
  new NotFound({ kind: "resource", message: `No run with id ${id}`, ...(param === undefined ? {} : { param }) })

export class RunsRepo extends Context.Service<RunsRepo, {
  create(keyId: string, run: NewRun, render: (run: RunView) => Rendered, idempotency?: Idempotency): Effect.Effect<Created, NotFound | Unprocessable | SqlError.SqlError>
  get(keyId: string, id: string): Effect.Effect<RunView, NotFound | SqlError.SqlError>
  list(keyId: string, query: ListQuery): Effect.Effect<RunPage, NotFound | SqlError.SqlError>
  /** Ends a live run `cancelled` (an `outcome` event) and asks its live children to cancel too. */
  cancel(keyId: string, id: string, reason: string | null): Effect.Effect<RunView, NotFound | SqlError.SqlError>
  /**
   * Ends live runs of revoked keys `failed`/`key_revoked` (at most `limit` per call): their owner
   * can no longer append to them or cancel them, so they would otherwise stay live for ever.
   */
  endRevoked(limit?: number): Effect.Effect<number, SqlError.SqlError>
  /** The run's state without its documents, for its actor and its readers (no tenant check: they check or own the run). */
  state(id: string): Effect.Effect<RunStateRow | undefined, SqlError.SqlError>
  /** The run's state without its documents, when the run is this key's: what an ownership check reads. */
  owned(keyId: string, id: string): Effect.Effect<RunStateRow, NotFound | SqlError.SqlError>
  /** The row a view shows (no tenant check: the dashboard's operator sees every run). */
  row(id: string): Effect.Effect<RunRow | undefined, SqlError.SqlError>
  /** The run's input and tools, read only where a step builds its first request from them. */
  documents(id: string): Effect.Effect<{ readonly input: Json; readonly tools: ReadonlyArray<Json> } | undefined, SqlError.SqlError>
}>()("gateway/runs/RunsRepo") {
  static readonly layer = Layer.effect(RunsRepo, Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const log = yield* RunLog
    const columns = sql.literal(RUN_COLUMNS)
    const stateColumns = sql.literal(RUN_STATE_COLUMNS)

    const findRow = (keyId: string, id: string) =>
      Effect.flatMap(sql<StoredRunRow>`SELECT ${columns} FROM runs WHERE id = ${id} AND key_id = ${keyId}`, firstWithDocuments(sql))

    const owned = Effect.fn("RunsRepo.owned")(function*(keyId: string, id: string) {
      const row = (yield* sql<RunStateRow>`SELECT ${stateColumns} FROM runs WHERE id = ${id} AND key_id = ${keyId}`)[0]
      return row ?? (yield* notFound(id))
    })

    const insertRun = Effect.fnUntraced(function*(keyId: string, run: NewRun) {
      if (run.parentRunId !== null) yield* Effect.mapError(owned(keyId, run.parentRunId), (error) => error._tag === "NotFound" ? notFound(run.parentRunId!, "parentRunId") : error)
      const machine = persistRun(startRun({ executable: run.executable }))
      // The documents a caller sent (up to 16 MiB each) go to SQL staged, in statements of 256 KiB,
      // when large (`jsonParameter`), and the row comes back without them: the caller has them.
      const [input, tools, metadata] = yield* Effect.all([
        jsonParameter(sql, run.input, "jsonb"),
        jsonParameter(sql, run.tools, "jsonb"),
        jsonParameter(sql, run.metadata, "jsonb")
      ])
      const rows = yield* sql<RunStateRow>`INSERT INTO runs (id, key_id, parent_run_id, status, executable, model, input, tools,
          optimization, metadata, node_ids, machine, budget_micros, lease_owner, lease_expires_at, attempt, documents_bytes)
        VALUES (${newId("run")}, ${keyId}, ${run.parentRunId}, 'running', ${run.executable}, ${run.model},
          ${input.fragment}, ${tools.fragment}, ${JSON.stringify(run.optimization)}::jsonb,
          ${metadata.fragment}, ${JSON.stringify(run.executable ? [newId("node")] : [])}::jsonb,
          ${JSON.stringify(machine)}::jsonb, ${run.budgetMicros}, ${run.lease?.owner ?? null},
          now() + ${run.lease?.ttlMs ?? 0}::int * interval '1 millisecond', ${run.lease === undefined ? 0 : 1},
          ${tools.bytes + metadata.bytes})
        RETURNING ${stateColumns}`
      yield* Effect.all([input.release, tools.release, metadata.release], { discard: true })
      return { ...rows[0], tools: run.tools, metadata: run.metadata } satisfies RunRow
    })

    const createInTransaction = Effect.fnUntraced(function*(keyId: string, run: NewRun, render: (run: RunView) => Rendered, idempotency?: Idempotency) {
      if (idempotency !== undefined) {
        // A concurrent duplicate blocks on the primary key until the first create commits, then
        // finds its row: one run per key, whatever the timing.
        yield* sql`DELETE FROM run_idempotency WHERE key_id = ${keyId} AND idempotency_key = ${idempotency.key} AND expires_at < now()`
        const claimed = yield* sql`INSERT INTO run_idempotency (key_id, idempotency_key, request_hash, run_id, status, response, expires_at)
          VALUES (${keyId}, ${idempotency.key}, ${idempotency.requestHash}, '', 0, 'null'::jsonb, now() + ${`${IDEMPOTENCY_TTL_HOURS} hours`}::interval)
          ON CONFLICT (key_id, idempotency_key) DO NOTHING RETURNING key_id`
        if (claimed.length === 0) {
          const rows = yield* sql<{ request_hash: string; status: number; response: unknown }>`SELECT request_hash, status, response
            FROM run_idempotency WHERE key_id = ${keyId} AND idempotency_key = ${idempotency.key}`
          if (rows[0].request_hash !== idempotency.requestHash) {
            return yield* new Unprocessable({
              message: "Idempotency-Key: this key was used with a different request body in the last 24 hours",
              param: "Idempotency-Key"
            })
          }
          return { _tag: "Replayed", response: { status: rows[0].status, body: rows[0].response } } satisfies Created
        }
      }
      const view = toRunView(yield* insertRun(keyId, run))
      const response = render(view)
      if (idempotency !== undefined) {
        const body = yield* jsonParameter(sql, response.body, "jsonb")
        yield* sql`UPDATE run_idempotency SET run_id = ${view.id}, status = ${response.status}, response = ${body.fragment}
          WHERE key_id = ${keyId} AND idempotency_key = ${idempotency.key}`
        yield* body.release
      }
      return { _tag: "Created", run: view, response } satisfies Created
    })

    const create = (keyId: string, run: NewRun, render: (run: RunView) => Rendered, idempotency?: Idempotency) =>
      sql.withTransaction(createInTransaction(keyId, run, render, idempotency)).pipe(Effect.withSpan("RunsRepo.create"))

    const get = Effect.fn("RunsRepo.get")(function*(keyId: string, id: string) {
      const row = yield* findRow(keyId, id)
      if (row === undefined) return yield* notFound(id)
      return toRunView(row)
    })

    const list = Effect.fn("RunsRepo.list")(function*(keyId: string, query: ListQuery) {
      let before: { created_at: Date; id: string } | undefined
      if (query.after !== undefined) {
        const rows = yield* sql<{ created_at: Date; id: string }>`SELECT created_at, id FROM runs WHERE id = ${query.after} AND key_id = ${keyId}`
        if (rows.length === 0) return yield* notFound(query.after, "after")
        before = rows[0]
      }
      // The page's runs first (ids and sizes), then their rows: a page stops at a byte budget.
      const candidates = yield* sql<{ id: string; documents_bytes: string | number }>`SELECT id, documents_bytes FROM runs WHERE key_id = ${keyId}
        AND (${query.status ?? null}::text IS NULL OR status = ${query.status ?? null})
        AND (${query.parentRunId ?? null}::text IS NULL OR parent_run_id = ${query.parentRunId ?? null})
        AND (${before === undefined} OR (created_at, id) < (${before?.created_at ?? new Date(0)}::timestamptz, ${before?.id ?? ""}))
        ORDER BY created_at DESC, id DESC LIMIT ${query.limit + 1}`
      const { ids, hasMore } = pageWithin(candidates, query.limit)
      const rows = ids.length === 0 ? [] : yield* sql<StoredRunRow>`SELECT ${columns} FROM runs WHERE id IN ${sql.in(ids)} ORDER BY created_at DESC, id DESC`
      const page = (yield* Effect.forEach(rows, withDocuments(sql))).map(toRunView)
      return { data: page, hasMore, nextCursor: hasMore && page.length > 0 ? page[page.length - 1].id : null }
    })

    const endCancelled = (id: string, reason: string | null) =>
      log.append(id, [{ type: "outcome", status: "cancelled", reason: reason ?? "cancelled by the caller" }]).pipe(
        // Finished meanwhile (or a lease fence that cannot apply here): the run stays as it ended.
        Effect.catchTags({ Conflict: () => Effect.void, InvalidRequest: () => Effect.void, LeaseLost: () => Effect.void }),
        Effect.asVoid
      )

    const cancelTree = Effect.fnUntraced(function*(keyId: string, id: string, reason: string | null, depth: number): Effect.fn.Return<void, NotFound | SqlError.SqlError> {
      const row = yield* owned(keyId, id)
      if (!isTerminal(row.status)) yield* endCancelled(id, reason)
      if (depth > 32) return // a tree deeper than this is a loop someone built by hand
      const children = yield* sql<{ id: string }>`SELECT id FROM runs WHERE parent_run_id = ${id} AND key_id = ${keyId} AND finished_at IS NULL`
      yield* Effect.forEach(children, (child) => cancelTree(keyId, child.id, `parent run ${id} was cancelled`, depth + 1), { discard: true })
    })

    const cancel = (keyId: string, id: string, reason: string | null) =>
      Effect.andThen(cancelTree(keyId, id, reason, 0), get(keyId, id)).pipe(Effect.withSpan("RunsRepo.cancel"))

    const row = Effect.fn("RunsRepo.row")(function*(id: string) {
      return yield* firstWithDocuments(sql)(yield* sql<StoredRunRow>`SELECT ${columns} FROM runs WHERE id = ${id}`)
    })

    const state = Effect.fn("RunsRepo.state")(function*(id: string) {
      return (yield* sql<RunStateRow>`SELECT ${stateColumns} FROM runs WHERE id = ${id}`)[0]
    })

    // In pieces, parsed in slices (`runDocuments`): an input of megabytes, read as jsonb, was decoded
    // and parsed by the SQL client in one turn of the event loop (66–77 ms for 6 MB on a slow VM).
    const documents = Effect.fn("RunsRepo.documents")(function*(id: string) {
      const pieces = yield* runDocuments(sql, id, ["input", "tools"])
      if (pieces === undefined) return undefined
      const inputPieces = pieces.get("input")
      const input = inputPieces === undefined ? null : (yield* parseStoredInSlices(inputPieces)) as Json
      const tools = (yield* parseStoredInSlices(pieces.get("tools") ?? [])) as ReadonlyArray<Json>
      return { input, tools }
    })

    const endRevoked = Effect.fn("RunsRepo.endRevoked")(function*(limit = 100) {
      const rows = yield* sql<{ id: string }>`SELECT r.id FROM runs r JOIN api_keys k ON k.id = r.key_id
        WHERE r.finished_at IS NULL AND k.revoked_at IS NOT NULL LIMIT ${limit}`
      yield* Effect.forEach(rows, (run) =>
        log.append(run.id, [{ type: "outcome", status: "failed", reason: "key_revoked" }]).pipe(
          // Finished meanwhile: nothing to do.
          Effect.catchTags({ Conflict: () => Effect.void, InvalidRequest: () => Effect.void, LeaseLost: () => Effect.void, NotFound: () => Effect.void })
        ), { discard: true })
      return rows.length
    })

    return RunsRepo.of({ create, get, list, cancel, state, owned, row, documents, endRevoked })
  }))
}
