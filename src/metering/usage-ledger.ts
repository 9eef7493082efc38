/**
 * The usage ledger: one row per metered call in `usage_ledger`, the source of truth for spend.
 *
 * `record` only appends to an in-memory buffer (no SQL on the request path). A background fiber
 * writes the buffer in multi-row INSERTs every `flushIntervalMs`, or sooner once `batchSize`
 * entries wait. Rows leave the buffer only after their INSERT committed, and `request_id` is the
 * primary key (ON CONFLICT DO NOTHING), so a batch retried after an ambiguous failure is written
 * once. Closing the layer (graceful stop) stops the fiber and flushes everything, retrying for a
 * while if the database hiccups.
 *
 * The buffer is bounded: while the database refuses the writes but still answers reads (a full
 * disk: keys and budgets keep working), calls would go on and the buffer would grow until the
 * process ran out of memory, taking every unwritten row with it. Past `maxPending` rows, `refusal`
 * answers new calls with a 503 (the metering refuses them before they start) until the rows are
 * written; calls already running still record theirs.
 */
import { Clock, Context, Effect, Layer, Latch, Schedule, Semaphore } from "effect"
import { SqlClient, type SqlError } from "effect/sql"
import { Settings } from "../config/settings.ts"
import { ServiceUnavailable } from "../errors.ts"
import type { Micros } from "../model/money.ts"
import type { Usage } from "../model/usage.ts"
import { isDataException, sqlState } from "../storage/sql-failures.ts"
import { RepeatedFailure } from "../util/repeated-failure.ts"
import { monthOf } from "./month.ts"

/** What paid for a call: the monthly allowance, or prepaid credits. */
export type Funding = "allowance" | "credits"

export interface LedgerEntry {
  readonly keyId: string
  readonly model: string
  /** Unique per metered call. */
  readonly requestId: string
  readonly usage: Usage
  /** What was charged (the list-price cost, clamped to the reservation). */
  readonly costMicros: Micros
  /** When the call started: a call is billed to the month it began in. */
  readonly at: Date
  readonly funding?: Funding
}

/** What a set of calls used and cost. */
export interface UsageTotals {
  readonly requests: number
  readonly inputTokens: number
  readonly outputTokens: number
  readonly cachedInputTokens: number
  readonly reasoningTokens: number
  readonly costMicros: Micros
}

export interface ModelTotals extends UsageTotals {
  readonly model: string
}

export interface SpendQuery {
  readonly keyId: string
  readonly funding: Funding
  /** `[from, to)` in epoch ms; absent: unbounded. */
  readonly from?: number | undefined
  readonly to?: number | undefined
  readonly requestIds?: ReadonlyArray<string> | undefined
}

export interface LedgerOptions {
  readonly flushIntervalMs?: number
  readonly batchSize?: number
  /** Rows that may wait to be written before new calls are refused (`GATEWAY_LEDGER_MAX_PENDING`). */
  readonly maxPending?: number
}

export class UsageLedger extends Context.Service<UsageLedger, {
  /** Appends to the in-memory buffer: O(1), never fails, never waits. */
  record(entry: LedgerEntry): Effect.Effect<void>
  /** The same, as a plain call (the metering hot path). */
  recordNow(entry: LedgerEntry): void
  /** The 503 for a new call while `maxPending` rows wait to be written; undefined otherwise. */
  refusal(): ServiceUnavailable | undefined
  /** Writes everything buffered so far. */
  flush(): Effect.Effect<void, SqlError.SqlError>
  /** Per-model totals of `[from, to)`, for one key or (keyId absent) all keys; flushes first. */
  summary(query: { keyId?: string | undefined; from: Date; to: Date }): Effect.Effect<ReadonlyArray<ModelTotals>, SqlError.SqlError>
  /**
   * Spend of one budget (SQL + still buffered), read in one snapshot with which of `requestIds`
   * that total already includes: the allowance's rebuild after a store loss (see allowance.ts).
   */
  spentOn(query: SpendQuery): Effect.Effect<{ readonly micros: Micros; readonly counted: ReadonlyArray<string> }, SqlError.SqlError>
  /** Allowance spend of the key in the current UTC month (SQL + still buffered). */
  spentThisMonth(keyId: string): Effect.Effect<Micros, SqlError.SqlError>
  /** Credits spend of the key, all time (SQL + still buffered). */
  spentOnCredits(keyId: string): Effect.Effect<Micros, SqlError.SqlError>
  /** Entries not yet written. */
  readonly pending: Effect.Effect<number>
  /** A copy of the entries not yet written (a row leaves only once its INSERT committed). */
  readonly unflushed: Effect.Effect<ReadonlyArray<LedgerEntry>>
}>()("gateway/metering/UsageLedger") {
  static readonly layerWith = (options: LedgerOptions) => Layer.effect(UsageLedger, make(options))
  /** Needs SqlClient and Settings. */
  static readonly layer = Layer.unwrap(Effect.gen(function*() {
    const { ledgerMaxPending } = yield* Settings
    return UsageLedger.layerWith({ maxPending: ledgerMaxPending })
  }))
  /** Flushes on every 10 entries or 50 ms, for tests that watch batching. */
  static readonly layerTest = UsageLedger.layerWith({ flushIntervalMs: 50, batchSize: 10 })
}

const fundingOf = (entry: LedgerEntry): Funding => entry.funding ?? "allowance"
const sumCost = (entries: ReadonlyArray<LedgerEntry>, keep: (entry: LedgerEntry) => boolean) =>
  entries.reduce((sum, entry) => (keep(entry) ? sum + entry.costMicros : sum), 0)

function make(options: LedgerOptions) {
  return Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const flushIntervalMs = options.flushIntervalMs ?? 1_000
    const batchSize = options.batchSize ?? 200
    const maxPending = options.maxPending ?? 100_000
    const buffer: Array<LedgerEntry> = []
    const wake = Latch.makeUnsafe(false)
    // One writer at a time; readers that add the buffer to SQL totals take it too, so an entry is
    // never counted twice (in SQL and still in the buffer) nor missed.
    const lock = yield* Semaphore.make(1)

    // One JSON parameter instead of ten placeholders per row: a batch of hundreds of rows is one
    // statement with one bound value, not a statement with thousands of them to parse and bind.
    // Each row is an array in the columns' order: as objects, the repeated field names were half
    // the JSON, and building, encoding and copying that JSON is the flush's main-thread work.
    // `skipStored`: a row whose request id is stored already is skipped (a retried batch).
    const write = (batch: ReadonlyArray<LedgerEntry>, skipStored: boolean) => {
      const rows = batch.map((e) => [
        e.requestId, e.keyId, e.model, fundingOf(e), e.usage.inputTokens, e.usage.outputTokens,
        e.usage.cachedInputTokens, e.usage.reasoningTokens, e.costMicros, e.at.toISOString()
      ])
      return sql`INSERT INTO usage_ledger (request_id, key_id, model, funding, input_tokens, output_tokens,
          cached_input_tokens, reasoning_tokens, cost_micros, at)
        SELECT r->>0, r->>1, r->>2, r->>3, (r->>4)::bigint, (r->>5)::bigint, (r->>6)::bigint, (r->>7)::bigint,
          (r->>8)::bigint, (r->>9)::timestamptz
        FROM jsonb_array_elements(${JSON.stringify(rows)}::jsonb) AS r
        ${sql.literal(skipStored ? "ON CONFLICT (request_id) DO NOTHING" : "")}`
    }
    /**
     * A batch is written without the conflict clause, and again with it where a row was stored
     * already (a unique violation: a batch whose first write committed unanswered). The clause
     * makes every row a speculative insertion (an index probe, a token, a confirmation): ~8 of
     * ~34 µs a row in PGlite (a scratch loop, 200-row statements), on the database's thread; a
     * retried batch is rare.
     */
    const insert = (batch: ReadonlyArray<LedgerEntry>) =>
      write(batch, false).pipe(Effect.catchIf((error) => sqlState(error) === "23505", () => write(batch, true)))

    // A row the database cannot store (class 22, a value it refuses; class 23, a constraint) would
    // fail its batch on every try and hold back every row behind it for good — and, once the
    // buffer is full, every call. Its batch is written row by row instead, and only such a row is
    // dropped, logged whole as an error so an operator can put it back by hand.
    const unstorable = (error: SqlError.SqlError) => isDataException(error) || sqlState(error)?.startsWith("23") === true
    const insertEach = (batch: ReadonlyArray<LedgerEntry>) =>
      Effect.forEach(batch, (entry) =>
        write([entry], true).pipe(Effect.catchIf(unstorable, (error) =>
          Effect.logError(`usage ledger: a row the database cannot store is dropped: ${JSON.stringify(entry)}`, error)
        )), { discard: true })

    // Made once, not an `Effect.gen(function*…)` per flush (see `answer` in http/chat-answer.ts).
    const writeBuffer = Effect.fnUntraced(function*() {
      while (buffer.length > 0) {
        const batch = buffer.slice(0, batchSize)
        yield* insert(batch).pipe(Effect.catchIf(unstorable, () => insertEach(batch)))
        buffer.splice(0, batch.length)
      }
    })
    const flush = Effect.fn("UsageLedger.flush")(function*() {
      yield* lock.withPermits(1)(writeBuffer())
    })

    // A full batch wakes the writer on the next turn, not inside the call that filled it: opening
    // the latch runs its waiting fiber at once, so the flush's main-thread part (building and
    // sending the statement: 2.8 ms for 200 rows in a profile on a slow VM) ran inside the settle
    // of the request that filled the batch, before that request's answer was written.
    let wakeScheduled = false
    const wakeNextTurn = () => {
      if (wakeScheduled) return
      wakeScheduled = true
      setImmediate(() => {
        wakeScheduled = false
        wake.openUnsafe()
      })
    }

    const recordNow = (entry: LedgerEntry) => {
      buffer.push(entry)
      if (buffer.length >= batchSize) wakeNextTurn()
    }
    const record = (entry: LedgerEntry) => Effect.sync(() => recordNow(entry))

    const refusal = () =>
      buffer.length < maxPending ? undefined : new ServiceUnavailable({
        status: 503,
        message: `Usage ledger unavailable: ${buffer.length} calls' usage waits to be written (the database is not taking it); new calls resume once it is written`,
        retryAfterSeconds: 5
      })

    // Registered before the loop is forked, so at close the loop stops first, then this drains.
    yield* Effect.addFinalizer(() =>
      flush().pipe(
        Effect.retry(Schedule.exponential("100 millis").pipe(Schedule.upTo({ times: 8 }))),
        Effect.catch((error) =>
          Effect.logError(`usage ledger: ${buffer.length} entries could not be written at shutdown`, error, JSON.stringify(buffer))
        )
      )
    )
    // An outage fails every flush, once a second: logged once, then a line a minute (`RepeatedFailure`).
    const flushFailures = new RepeatedFailure("usage ledger")
    yield* Effect.forkScoped(Effect.forever(Effect.gen(function*() {
      yield* wake.await.pipe(Effect.timeoutOption(flushIntervalMs))
      wake.closeUnsafe()
      yield* flush().pipe(
        Effect.andThen(flushFailures.succeeded),
        Effect.catch((error) =>
          buffer.length < maxPending
            ? flushFailures.failed(`flush failed, will retry (${buffer.length} pending)`, error)
            : flushFailures.failed(`flush failed, will retry (${buffer.length} pending: new calls are refused until they are written)`, error, "error")
        )
      )
    })))

    const summary = Effect.fn("UsageLedger.summary")(function*(query: { keyId?: string | undefined; from: Date; to: Date }) {
      yield* flush()
      const rows = yield* sql<{
        model: string; requests: number; input: number; output: number; cached: number; reasoning: number; cost: number
      }>`SELECT model, count(*)::float8 AS requests, sum(input_tokens)::float8 AS input, sum(output_tokens)::float8 AS output,
          sum(cached_input_tokens)::float8 AS cached, sum(reasoning_tokens)::float8 AS reasoning, sum(cost_micros)::float8 AS cost
        FROM usage_ledger
        WHERE ${query.keyId === undefined ? sql`true` : sql`key_id = ${query.keyId}`}
          AND at >= ${query.from.toISOString()} AND at < ${query.to.toISOString()}
        GROUP BY model ORDER BY model`
      return rows.map((r): ModelTotals => ({
        model: r.model,
        requests: Number(r.requests),
        inputTokens: Number(r.input),
        outputTokens: Number(r.output),
        cachedInputTokens: Number(r.cached),
        reasoningTokens: Number(r.reasoning),
        costMicros: Number(r.cost)
      }))
    })

    /** `spentOn` under the flush lock (a generator made once, not per query). */
    const spentOnLocked = Effect.fnUntraced(function*(query: SpendQuery) {
      const { keyId, funding, from, to } = query
      const ids = query.requestIds ?? []
      // One statement, one snapshot: the total and which of `ids` it counts cannot disagree.
      const rows = yield* sql<{ cost: number | null; counted: Array<string> | null }>`SELECT sum(cost_micros)::float8 AS cost,
          ${ids.length === 0 ? sql`NULL::text[]` : sql`array_agg(request_id) FILTER (WHERE request_id IN (SELECT jsonb_array_elements_text(${JSON.stringify(ids)}::jsonb)))`} AS counted
        FROM usage_ledger
        WHERE key_id = ${keyId} AND funding = ${funding}
        ${from === undefined ? sql`` : sql`AND at >= ${new Date(from).toISOString()}`}
        ${to === undefined ? sql`` : sql`AND at < ${new Date(to).toISOString()}`}`
      const inBudget = (e: LedgerEntry) =>
        e.keyId === keyId && fundingOf(e) === funding &&
        (from === undefined || e.at.getTime() >= from) && (to === undefined || e.at.getTime() < to)
      const wanted = new Set(ids)
      const counted = new Set(rows[0]?.counted ?? [])
      for (const e of buffer) if (inBudget(e) && wanted.has(e.requestId)) counted.add(e.requestId)
      return { micros: Number(rows[0]?.cost ?? 0) + sumCost(buffer, inBudget), counted: [...counted] }
    })

    const spentOn = Effect.fn("UsageLedger.spentOn")(function*(query: SpendQuery) {
      return yield* lock.withPermits(1)(spentOnLocked(query))
    })

    const spentThisMonth = Effect.fn("UsageLedger.spentThisMonth")(function*(keyId: string) {
      const month = monthOf(yield* Clock.currentTimeMillis)
      return (yield* spentOn({ keyId, funding: "allowance", from: month.start, to: month.end })).micros
    })
    const spentOnCredits = Effect.fn("UsageLedger.spentOnCredits")(function*(keyId: string) {
      return (yield* spentOn({ keyId, funding: "credits" })).micros
    })

    return UsageLedger.of({
      record,
      recordNow,
      refusal,
      flush,
      summary,
      spentOn,
      spentThisMonth,
      spentOnCredits,
      pending: Effect.sync(() => buffer.length),
      unflushed: Effect.sync(() => buffer.slice())
    })
  })
}
