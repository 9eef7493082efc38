/**
 * The run event log in SQL. One append is one transaction: lock the run row, fold the events
 * through the run machine (machines/run.ts), allocate their `seq`s gap-free after `last_seq`,
 * insert them and store the new status and machine state — all or nothing. A finished run refuses
 * appends (409), so the `outcome` is written exactly once. After the commit a wake-up signal goes
 * to every subscriber (SSE readers, the run's actor), on this instance or another.
 *
 * Service writes carry a fence (the lease owner and attempt that wrote them): an instance that
 * lost its lease to another cannot write into the run any more.
 */
import { Context, Effect, Layer, Schema } from "effect"
import { SqlClient, type SqlError } from "effect/sql"
import { isTerminal, type RunSnapshot, restoreRun, statusOf, stepRun, toRunEvent } from "../../machines/run.ts"
import { RunSignals } from "../coordination/run-signals.ts"
import { Conflict, InvalidRequest, NotFound, shown } from "../errors.ts"
import type { Usage } from "../model/usage.ts"
import { PAGE_BUDGET_BYTES } from "../util/json-limits.ts"
import { jsonParameter } from "../storage/json-parameter.ts"
import { parseStoredInSlices } from "../util/sliced-json.ts"
import { storedPieces } from "../storage/stored-pieces.ts"
import { type EventRow, type LogEvent, RUN_STATE_COLUMNS, type RunStateRow, SERVICE_EVENT_TYPES, toLogEvent } from "./run-record.ts"

/** The instance no longer holds the run's lease (another instance took it over). */
export class LeaseLost extends Schema.TaggedError<LeaseLost>()("LeaseLost", { runId: Schema.String }) {}

export interface Fence {
  readonly owner: string
  readonly attempt: number
}

/** A step's cost, settled in the same transaction as its `node.completed` (once per node id). */
export interface Settle {
  readonly nodeId: string
  readonly costMicros: number
  readonly usage: Usage
}

export interface AppendOptions {
  /** Caller appends name the key (tenant scope) and may not write service event types on executable runs. */
  readonly keyId?: string
  readonly fence?: Fence
  readonly settle?: Settle
}

export interface Appended {
  readonly appended: number
  readonly lastSeq: number
  readonly snapshot: RunSnapshot
}

export type NewEvent = { readonly type: string; readonly [field: string]: unknown }

const notFound = (id: string) => new NotFound({ kind: "resource", message: `No run with id ${id}` })

/** Above this size an event is written in a statement of its own and read as bytes, parsed in slices. */
const LARGE_EVENT_BYTES = 256 * 1024

/** An event as stored: its JSON text's UTF-8 bytes, which hold every field but `seq`. */
export interface EventText {
  readonly seq: number
  readonly type: string
  /** The stored JSON text's bytes, in pieces of at most 256 KiB. */
  readonly text: ReadonlyArray<Uint8Array>
}

/** Settles a step's hold into spend, at most what was held; a settled step is never charged again. */
const settleCharge = Effect.fnUntraced(function*(sql: SqlClient.SqlClient, runId: string, settle: Settle) {
  const charged = yield* sql<{ reserved_micros: string | number; cost_micros: string | number }>`UPDATE run_charges
    SET cost_micros = LEAST(${settle.costMicros}, reserved_micros), settled_at = now()
    WHERE node_id = ${settle.nodeId} AND run_id = ${runId} AND cost_micros IS NULL
    RETURNING reserved_micros, cost_micros`
  if (charged.length === 0) return false
  yield* sql`UPDATE runs SET
      spent_micros = spent_micros + ${Number(charged[0].cost_micros)},
      reserved_micros = reserved_micros - ${Number(charged[0].reserved_micros)},
      input_tokens = input_tokens + ${settle.usage.inputTokens},
      output_tokens = output_tokens + ${settle.usage.outputTokens}
    WHERE id = ${runId}`
  return true
})

export class RunLog extends Context.Service<RunLog, {
  append(runId: string, events: ReadonlyArray<NewEvent>, options?: AppendOptions): Effect.Effect<Appended, NotFound | Conflict | InvalidRequest | LeaseLost | SqlError.SqlError>
  /** Settles a step's cost on its own (when the run ended before its `node.completed` could be written). */
  settle(runId: string, settle: Settle): Effect.Effect<boolean, SqlError.SqlError>
  /**
   * Events with `seq > after`, oldest first: at most `limit`, and fewer when they are large (a page
   * stops once PAGE_BUDGET_BYTES of events came before; the first always comes). Read on until the
   * cursor reaches the run's `last_seq`.
   */
  read(runId: string, after: number, limit: number): Effect.Effect<ReadonlyArray<LogEvent>, SqlError.SqlError>
  /** `read`'s events as the JSON texts they were stored in (without their `seq`), for a reader that sends them on. */
  texts(runId: string, after: number, limit: number): Effect.Effect<ReadonlyArray<EventText>, SqlError.SqlError>
}>()("gateway/runs/RunLog") {
  static readonly layer = Layer.effect(RunLog, Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const signals = yield* RunSignals

    /** Folds a batch through the machine; the first event it cannot take fails the whole batch. */
    const fold = Effect.fnUntraced(function*(row: RunStateRow, events: ReadonlyArray<NewEvent>, callerWrite: boolean) {
      let snapshot = restoreRun(row.machine)
      const nodeIds = [...row.node_ids]
      for (const [i, event] of events.entries()) {
        if (snapshot.status === "done") {
          return yield* new InvalidRequest({ message: `events[${i}]: the run ends with the outcome before it; nothing may follow an outcome`, param: `events[${i}]` })
        }
        if (callerWrite && row.executable) {
          if (SERVICE_EVENT_TYPES.has(event.type)) {
            return yield* new InvalidRequest({
              message: `events[${i}].type: '${shown(event.type)}' is written by the service on an executable run (end it with POST …/cancel)`,
              param: `events[${i}].type`
            })
          }
          if (event.type === "tool.result" && !snapshot.context.pending.some((call) => call.id === event.toolUseId)) {
            return yield* new InvalidRequest({
              message: `events[${i}].toolUseId: the run is not waiting for a result of tool call ${String(event.toolUseId)}`,
              param: `events[${i}].toolUseId`
            })
          }
        }
        const machineEvent = toRunEvent(event)
        if (machineEvent !== undefined) snapshot = stepRun(snapshot, machineEvent)
        if (row.executable && machineEvent?.type === "node.started" && !nodeIds.includes(machineEvent.nodeId)) nodeIds.push(machineEvent.nodeId)
      }
      return { snapshot, nodeIds }
    })

    const appendLocked = Effect.fnUntraced(function*(runId: string, events: ReadonlyArray<NewEvent>, options: AppendOptions = {}) {
      const rows = yield* sql<RunStateRow>`SELECT ${sql.literal(RUN_STATE_COLUMNS)} FROM runs WHERE id = ${runId} FOR UPDATE`
      const row = rows[0]
      if (row === undefined || (options.keyId !== undefined && row.key_id !== options.keyId)) return yield* notFound(runId)
      if (isTerminal(row.status)) {
        return yield* new Conflict({ message: `The run ${runId} is ${row.status}; its log takes no more events` })
      }
      if (options.fence !== undefined && (row.lease_owner !== options.fence.owner || row.attempt !== options.fence.attempt)) {
        return yield* new LeaseLost({ runId })
      }
      if (options.settle !== undefined) yield* settleCharge(sql, runId, options.settle)
      const { snapshot, nodeIds } = yield* fold(row, events, options.keyId !== undefined)
      const first = Number(row.last_seq) + 1
      const lastSeq = Number(row.last_seq) + events.length
      const status = statusOf(snapshot)
      const finished = isTerminal(status)
      if (events.length > 0) {
        // An event a caller sends may be 16 MiB (a tool result): its JSON is made in slices and
        // staged 1 MiB a statement (`jsonParameter`), then stored by a statement of its own;
        // small ones go together in one.
        const data = yield* Effect.forEach(events, (event) => jsonParameter(sql, { ...event, seq: undefined }, "json"))
        const small = events.flatMap((event, i) => data[i]!.bytes > LARGE_EVENT_BYTES ? [] : [{ event, i }])
        if (small.length > 0) {
          yield* sql`INSERT INTO run_events (run_id, seq, type, data, bytes) VALUES ${
            sql.csv(small.map(({ event, i }) => sql`(${runId}, ${first + i}, ${event.type}, ${data[i]!.fragment}, ${data[i]!.bytes})`))
          }`
        }
        for (const [i, event] of events.entries()) {
          if (data[i]!.bytes <= LARGE_EVENT_BYTES) continue
          yield* sql`INSERT INTO run_events (run_id, seq, type, data, bytes) VALUES (${runId}, ${first + i}, ${event.type}, ${data[i]!.fragment}, ${data[i]!.bytes})`
        }
        yield* Effect.forEach(data, (parameter) => parameter.release, { discard: true })
      }
      yield* sql`UPDATE runs SET
          last_seq = ${lastSeq},
          status = ${status},
          machine = ${JSON.stringify({ value: snapshot.value, context: snapshot.context })}::jsonb,
          node_ids = ${JSON.stringify(nodeIds)}::jsonb,
          updated_at = now(),
          finished_at = CASE WHEN ${finished} THEN now() ELSE NULL END,
          lease_owner = CASE WHEN ${finished} THEN NULL ELSE lease_owner END
        WHERE id = ${runId}`
      return { appended: events.length, lastSeq, snapshot }
    })

    const append = (runId: string, events: ReadonlyArray<NewEvent>, options: AppendOptions = {}) =>
      sql.withTransaction(appendLocked(runId, events, options)).pipe(
        Effect.tap(({ lastSeq }) => signals.publish({ runId, lastSeq })),
        Effect.withSpan("RunLog.append")
      )

    // A page: at most `limit` events, and no more than PAGE_BUDGET_BYTES of them after the first.
    const page = (runId: string, after: number, limit: number) =>
      sql`SELECT seq, type, bytes, data FROM (
          SELECT seq, type, bytes, data, sum(bytes) OVER (ORDER BY seq) - bytes AS before
          FROM run_events WHERE run_id = ${runId} AND seq > ${after} ORDER BY seq LIMIT ${limit}
        ) page WHERE before < ${PAGE_BUDGET_BYTES} ORDER BY seq`

    // A large event is left out of its page and read as its text's bytes in pieces (`storedPieces`):
    // never decoded in one turn, nor buffered whole by the SQL client.
    const largeEvent = (runId: string, seq: string | number) =>
      Effect.map(
        storedPieces(sql, sql`SELECT convert_to(data::text, 'UTF8') AS data FROM run_events WHERE run_id = ${runId} AND seq = ${seq}`, ["data"]),
        (pieces) => pieces?.get("data") ?? []
      )

    const read = Effect.fn("RunLog.read")(function*(runId: string, after: number, limit: number) {
      const rows = yield* sql<{ readonly seq: string | number; readonly type: string; readonly data: EventRow["data"] | null }>`SELECT seq, type,
          CASE WHEN bytes <= ${LARGE_EVENT_BYTES} THEN data END AS data
        FROM (${page(runId, after, limit)}) events ORDER BY seq`
      return yield* Effect.forEach(rows, (row) =>
        row.data !== null
          ? Effect.succeed(toLogEvent({ seq: row.seq, type: row.type, data: row.data }))
          : Effect.map(Effect.flatMap(largeEvent(runId, row.seq), parseStoredInSlices), (data) =>
            toLogEvent({ seq: row.seq, type: row.type, data: data as EventRow["data"] })))
    })

    const texts = Effect.fn("RunLog.texts")(function*(runId: string, after: number, limit: number) {
      const rows = yield* sql<{ readonly seq: string | number; readonly type: string; readonly text: Uint8Array | null }>`SELECT seq, type,
          CASE WHEN bytes <= ${LARGE_EVENT_BYTES} THEN convert_to(data::text, 'UTF8') END AS text
        FROM (${page(runId, after, limit)}) events ORDER BY seq`
      return yield* Effect.forEach(rows, (row) =>
        Effect.map(row.text !== null ? Effect.succeed([row.text]) : largeEvent(runId, row.seq), (text): EventText => ({ seq: Number(row.seq), type: row.type, text })))
    })

    const settle = (runId: string, charge: Settle) => sql.withTransaction(settleCharge(sql, runId, charge)).pipe(Effect.withSpan("RunLog.settle"))

    return RunLog.of({ append, settle, read, texts })
  }))
}
