/**
 * Batches and their requests in SQL. A batch and all its requests are written in the create's
 * transaction. Every change to a request's state locks its batch row first (one lock order, so no
 * deadlocks) and folds the matching event into the batch machine (machines/batch.ts) in the same
 * transaction: the counts and status a GET shows always agree with the request rows.
 *
 * Execution (src/batches/batch-workers.ts): a worker claims requests with a lease (`running`,
 * `lease_owner`, `lease_expires_at`, `attempt + 1`), like runs. A result is written only while the
 * claim's attempt is the current one (`finish` is fenced), so a request taken over after a crash
 * or a stall gets exactly one result, whichever worker answers first under the current lease.
 */
import { Context, Effect, Layer } from "effect"
import { SqlClient, type SqlError } from "effect/sql"
import {
  type BatchEvent,
  type BatchKind,
  type BatchState,
  messagesStatus,
  openaiStatus,
  restoreBatch,
  startBatch,
  stepBatch
} from "../../machines/batch.ts"
import { InvalidRequest, NotFound } from "../errors.ts"
import { insertFile } from "../files/files-repo.ts"
import { storedPieces } from "../storage/stored-pieces.ts"
import { insertGroups } from "../storage/insert-groups.ts"
import { stagesText, textParameter } from "../storage/json-parameter.ts"
import { randomBase62 } from "../util/ids.ts"
import { openaiOutputFiles } from "./openai-output.ts"

export interface BatchRecord {
  readonly id: string
  readonly keyId: string
  readonly kind: BatchKind
  readonly endpoint: string
  readonly state: BatchState
  readonly inputFileId: string | null
  readonly outputFileId: string | null
  readonly errorFileId: string | null
  readonly errors: unknown
  readonly metadata: unknown
  readonly completionWindow: string | null
  readonly createdAt: Date
  readonly inProgressAt: Date | null
  readonly finalizingAt: Date | null
  readonly endedAt: Date | null
  readonly cancelInitiatedAt: Date | null
  readonly expiresAt: Date
  readonly archivedAt: Date | null
}

interface BatchRow {
  readonly id: string
  readonly key_id: string
  readonly kind: BatchKind
  readonly endpoint: string
  readonly machine: unknown
  readonly input_file_id: string | null
  readonly output_file_id: string | null
  readonly error_file_id: string | null
  readonly errors: unknown
  readonly metadata: unknown
  readonly completion_window: string | null
  readonly created_at: Date
  readonly in_progress_at: Date | null
  readonly finalizing_at: Date | null
  readonly ended_at: Date | null
  readonly cancel_initiated_at: Date | null
  readonly expires_at: Date
  readonly archived_at: Date | null
}

const toRecord = (row: BatchRow): BatchRecord => ({
  id: row.id,
  keyId: row.key_id,
  kind: row.kind,
  endpoint: row.endpoint,
  state: restoreBatch(row.machine),
  inputFileId: row.input_file_id,
  outputFileId: row.output_file_id,
  errorFileId: row.error_file_id,
  errors: row.errors,
  metadata: row.metadata,
  completionWindow: row.completion_window,
  createdAt: row.created_at,
  inProgressAt: row.in_progress_at,
  finalizingAt: row.finalizing_at,
  endedAt: row.ended_at,
  cancelInitiatedAt: row.cancel_initiated_at,
  expiresAt: row.expires_at,
  archivedAt: row.archived_at
})

export interface NewBatch {
  readonly kind: BatchKind
  readonly endpoint: string
  readonly inputFileId?: string
  readonly metadata?: unknown
  readonly completionWindow?: string
  /** How long the batch may take before its unanswered requests expire. */
  readonly windowMs: number
  readonly requests: ReadonlyArray<{ readonly customId: string; readonly params: string }>
  /** OpenAI: the input failed validation; the batch is created `failed` with these errors. */
  readonly validationErrors?: unknown
}

/** A request a worker holds. */
export interface BatchClaim {
  readonly batchId: string
  readonly idx: number
  readonly attempt: number
  /** How many times the request was taken over from a worker whose lease lapsed. */
  readonly takeovers: number
  readonly customId: string
  /** The request's params as their JSON text's UTF-8 bytes, in pieces (parsed in slices when large). */
  readonly params: ReadonlyArray<Uint8Array>
  readonly keyId: string
  readonly kind: BatchKind
  readonly endpoint: string
}

/** What a worker writes for a request: its final result, or "try again later". */
export type RequestOutcome =
  | { readonly _tag: "Ended"; readonly state: "succeeded" | "errored"; readonly result: string }
  | { readonly _tag: "Requeue"; readonly afterMs: number }

/** Results read per statement (see `forEachResultPage`). */
const RESULT_PAGE_ROWS = 32

export interface ResultRow {
  readonly idx: number
  readonly customId: string
  readonly state: string
  readonly result: string | null
}

export interface BatchPage {
  readonly data: ReadonlyArray<BatchRecord>
  readonly hasMore: boolean
}

const newBatchId = (kind: BatchKind) => kind === "messages" ? `msgbatch_${randomBase62(24)}` : `batch_${randomBase62(24)}`

const wireStatus = (state: BatchState) => state.kind === "messages" ? messagesStatus(state) : openaiStatus(state)

const notFound = (kind: BatchKind, id: string) =>
  new NotFound({ kind: "resource", message: kind === "messages" ? `No message batch with id ${id}` : `No batch with id ${id}`, param: "id" })

const COLUMNS = `id, key_id, kind, endpoint, machine, input_file_id, output_file_id, error_file_id, errors, metadata, completion_window,
  created_at, in_progress_at, finalizing_at, ended_at, cancel_initiated_at, expires_at, archived_at`

export class BatchesRepo extends Context.Service<BatchesRepo, {
  create(keyId: string, batch: NewBatch): Effect.Effect<BatchRecord, SqlError.SqlError>
  get(keyId: string, kind: BatchKind, id: string): Effect.Effect<BatchRecord, NotFound | SqlError.SqlError>
  /** Newest first. `after`: the page after that id (older); `before`: the page before it (newer). */
  list(keyId: string, kind: BatchKind, page: { limit: number; after?: string; before?: string }): Effect.Effect<BatchPage, InvalidRequest | SqlError.SqlError>
  /** Stops the unclaimed requests at once; in-flight ones finish. A second cancel changes nothing. */
  cancel(keyId: string, kind: BatchKind, id: string): Effect.Effect<BatchRecord, NotFound | SqlError.SqlError>
  /** Deletes an ended batch (Messages). */
  remove(keyId: string, kind: BatchKind, id: string): Effect.Effect<void, NotFound | InvalidRequest | SqlError.SqlError>
  /**
   * A batch's results in request order, handed to `take` a page of `RESULT_PAGE_ROWS` at a time: the
   * SQL client decodes a statement's whole result in one turn of the event loop, and a batch of long
   * answers holds tens of MiB of them.
   */
  forEachResultPage<E>(batchId: string, take: (rows: ReadonlyArray<ResultRow>) => Effect.Effect<void, E>): Effect.Effect<void, E | SqlError.SqlError>
  claim(owner: string, ttlMs: number, limit: number): Effect.Effect<ReadonlyArray<BatchClaim>, SqlError.SqlError>
  /** Writes a claim's outcome if the claim is still current; false when it was taken over. */
  finish(claim: BatchClaim, owner: string, outcome: RequestOutcome): Effect.Effect<boolean, SqlError.SqlError>
  /** Extends the leases `owner` holds; returns `batchId:idx@attempt` of each. */
  renew(owner: string, ttlMs: number): Effect.Effect<ReadonlySet<string>, SqlError.SqlError>
  release(owner: string): Effect.Effect<void, SqlError.SqlError>
  /** Lets the given leases of `owner` (`batchId:idx@attempt`, as `renew` returns them) lapse now. */
  releaseClaims(owner: string, claims: ReadonlyArray<string>): Effect.Effect<void, SqlError.SqlError>
  /**
   * Expires batches past `expires_at` (their unclaimed requests end `expired`), and ends the
   * in-flight requests of cancelled or expired batches whose worker died (lease lapsed).
   */
  sweep(): Effect.Effect<number, SqlError.SqlError>
}>()("gateway/batches/BatchesRepo") {
  static readonly layer = Layer.effect(BatchesRepo, Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const ttl = (ms: number) => sql`now() + ${Math.round(ms)}::int * interval '1 millisecond'`

    const lockBatch = (id: string) =>
      Effect.map(sql<BatchRow>`SELECT ${sql.literal(COLUMNS)} FROM batches WHERE id = ${id} FOR UPDATE`, (rows) => rows[0] as BatchRow | undefined)

    /**
     * Folds events into a locked batch and writes it back; an OpenAI batch that reaches
     * `finalizing` writes its output and error files and ends in the same transaction.
     */
    const apply = Effect.fnUntraced(function*(row: BatchRow, events: ReadonlyArray<BatchEvent>) {
      const before = restoreBatch(row.machine)
      let state = before
      for (const event of events) state = stepBatch(state, event).state
      let files = { output: row.output_file_id, error: row.error_file_id }
      if (state.phase === "finalizing") {
        files = yield* writeOutputFiles(row)
        state = stepBatch(state, { type: "finalized" }).state
      }
      if (state === before) return toRecord(row)
      const started = before.phase === "validating" && state.phase !== "validating" && state.outcome !== "failed"
      const cancelled = !before.cancelRequested && state.cancelRequested
      const finalizing = before.phase !== "finalizing" && before.phase !== "ended" && state.outcome !== null && state.outcome !== "failed" && row.kind === "openai"
      const ended = before.phase !== "ended" && state.phase === "ended"
      const rows = yield* sql<BatchRow>`UPDATE batches SET
          machine = ${JSON.stringify(state)}::jsonb,
          status = ${wireStatus(state)},
          output_file_id = ${files.output},
          error_file_id = ${files.error},
          in_progress_at = ${started ? sql`now()` : sql`in_progress_at`},
          cancel_initiated_at = ${cancelled ? sql`now()` : sql`cancel_initiated_at`},
          finalizing_at = ${finalizing ? sql`now()` : sql`finalizing_at`},
          ended_at = ${ended ? sql`now()` : sql`ended_at`}
        WHERE id = ${row.id} RETURNING ${sql.literal(COLUMNS)}`
      return toRecord(rows[0])
    })

    const writeOutputFiles = Effect.fnUntraced(function*(row: BatchRow) {
      const files = openaiOutputFiles()
      yield* forEachResultPage(row.id, (rows) => Effect.sync(() => files.add(rows)))
      const { output, error } = files.files()
      const outputFile = output === undefined ? undefined : yield* insertFile(sql, row.key_id, { filename: `${row.id}_output.jsonl`, purpose: "batch_output", content: output })
      const errorFile = error === undefined ? undefined : yield* insertFile(sql, row.key_id, { filename: `${row.id}_error.jsonl`, purpose: "batch_output", content: error })
      return { output: outputFile?.id ?? null, error: errorFile?.id ?? null }
    })

    const forEachResultPage = Effect.fnUntraced(function*<E>(batchId: string, take: (rows: ReadonlyArray<ResultRow>) => Effect.Effect<void, E>) {
      for (let after = -1;;) {
        const rows = yield* sql<{ idx: number; custom_id: string; state: string; result: string | null }>`SELECT idx, custom_id, state, result
          FROM batch_requests WHERE batch_id = ${batchId} AND idx > ${after} ORDER BY idx LIMIT ${RESULT_PAGE_ROWS}`
        if (rows.length > 0) yield* take(rows.map((r): ResultRow => ({ idx: Number(r.idx), customId: r.custom_id, state: r.state, result: r.result })))
        if (rows.length < RESULT_PAGE_ROWS) return
        after = Number(rows[rows.length - 1]!.idx)
      }
    })

    /** `create`'s transaction: the batch's row and, when it runs, its requests' rows. */
    const insertBatch = Effect.fnUntraced(function*(id: string, keyId: string, batch: NewBatch, state: BatchState) {
      const running = state.phase === "in_progress"
      const rows = yield* sql<BatchRow>`INSERT INTO batches (id, key_id, kind, endpoint, machine, status, input_file_id, errors, metadata,
          completion_window, in_progress_at, ended_at, expires_at)
        VALUES (${id}, ${keyId}, ${batch.kind}, ${batch.endpoint}, ${JSON.stringify(state)}::jsonb, ${wireStatus(state)},
          ${batch.inputFileId ?? null}, ${batch.validationErrors === undefined ? null : JSON.stringify(batch.validationErrors)}::jsonb,
          ${batch.metadata === undefined || batch.metadata === null ? null : JSON.stringify(batch.metadata)}::jsonb,
          ${batch.completionWindow ?? null}, ${running ? sql`now()` : null}, ${state.phase === "ended" ? sql`now()` : null}, ${ttl(batch.windowMs)})
        RETURNING ${sql.literal(COLUMNS)}`
      if (running) {
        // A large request's params (up to 16 MiB) are staged, a statement of their own: as one
        // parameter the SQL client encoded them in one turn (~100 ms for 12 MB on a slow VM).
        const indexed = batch.requests.map((r, idx) => ({ ...r, idx }))
        const small = indexed.filter((r) => !stagesText(r.params))
        for (const [at, end] of insertGroups(small, (r) => r.params.length)) {
          const group = small.slice(at, end).map((r): Record<string, unknown> => ({
            batch_id: id,
            idx: r.idx,
            custom_id: r.customId,
            params: r.params,
            state: "pending"
          }))
          yield* sql`INSERT INTO batch_requests ${sql.insert(group as unknown as readonly [Record<string, unknown>, ...Array<Record<string, unknown>>])}`
        }
        for (const r of indexed) {
          if (!stagesText(r.params)) continue
          const params = yield* textParameter(sql, r.params, "text")
          yield* sql`INSERT INTO batch_requests (batch_id, idx, custom_id, params, state) VALUES (${id}, ${r.idx}, ${r.customId}, ${params.fragment}, 'pending')`
          yield* params.release
        }
      }
      return toRecord(rows[0])
    })

    const create = Effect.fn("BatchesRepo.create")(function*(keyId: string, batch: NewBatch) {
      const id = newBatchId(batch.kind)
      let state = startBatch(batch.kind, batch.requests.length)
      if (batch.kind === "openai") {
        state = stepBatch(state, batch.validationErrors === undefined ? { type: "validated", total: batch.requests.length } : { type: "validation_failed" }).state
      }
      return yield* sql.withTransaction(insertBatch(id, keyId, batch, state))
    })

    const get = Effect.fn("BatchesRepo.get")(function*(keyId: string, kind: BatchKind, id: string) {
      const rows = yield* sql<BatchRow>`SELECT ${sql.literal(COLUMNS)} FROM batches WHERE id = ${id} AND key_id = ${keyId} AND kind = ${kind}`
      if (rows.length === 0) return yield* notFound(kind, id)
      return toRecord(rows[0])
    })

    const list = Effect.fn("BatchesRepo.list")(function*(keyId: string, kind: BatchKind, page: { limit: number; after?: string; before?: string }) {
      const cursorId = page.after ?? page.before
      let cursor = sql``
      if (cursorId !== undefined) {
        const at = yield* sql<{ id: string }>`SELECT id FROM batches WHERE id = ${cursorId} AND key_id = ${keyId} AND kind = ${kind}`
        const param = page.after !== undefined ? (kind === "messages" ? "after_id" : "after") : "before_id"
        if (at.length === 0) return yield* new InvalidRequest({ message: `${param}: no batch with id ${cursorId}`, param })
        // Compared in SQL: a timestamp read into JS loses its microseconds.
        const at_ = sql`(SELECT created_at, id FROM batches WHERE id = ${cursorId})`
        cursor = page.after !== undefined ? sql`AND (created_at, id) < ${at_}` : sql`AND (created_at, id) > ${at_}`
      }
      // A `before` page is the `limit` batches just newer than the cursor, still shown newest first.
      const rows = page.before !== undefined
        ? (yield* sql<BatchRow>`SELECT ${sql.literal(COLUMNS)} FROM batches WHERE key_id = ${keyId} AND kind = ${kind} ${cursor}
            ORDER BY created_at, id LIMIT ${page.limit + 1}`)
        : yield* sql<BatchRow>`SELECT ${sql.literal(COLUMNS)} FROM batches WHERE key_id = ${keyId} AND kind = ${kind} ${cursor}
            ORDER BY created_at DESC, id DESC LIMIT ${page.limit + 1}`
      const data = rows.slice(0, page.limit).map(toRecord)
      return { data: page.before !== undefined ? data.reverse() : data, hasMore: rows.length > page.limit }
    })

    const cancelLocked = Effect.fnUntraced(function*(keyId: string, kind: BatchKind, id: string) {
      const row = yield* lockBatch(id)
      if (row === undefined || row.key_id !== keyId || row.kind !== kind) return yield* notFound(kind, id)
      const state = restoreBatch(row.machine)
      if (state.cancelRequested || state.phase === "ended") return toRecord(row)
      const stopped = yield* sql`UPDATE batch_requests SET state = 'canceled', ended_at = now()
        WHERE batch_id = ${id} AND state = 'pending' RETURNING idx`
      return yield* apply(row, [{ type: "cancel", stopped: stopped.length }])
    })

    const cancel = Effect.fn("BatchesRepo.cancel")(function*(keyId: string, kind: BatchKind, id: string) {
      return yield* sql.withTransaction(cancelLocked(keyId, kind, id))
    })

    const remove = Effect.fn("BatchesRepo.remove")(function*(keyId: string, kind: BatchKind, id: string) {
      const batch = yield* get(keyId, kind, id)
      if (batch.state.phase !== "ended") {
        return yield* new InvalidRequest({ message: `Batch ${id} cannot be deleted while it is processing; cancel it first and wait until it has ended` })
      }
      yield* sql`DELETE FROM batches WHERE id = ${id} AND key_id = ${keyId}`
    })

    // The pending request with the lowest index first, across batches (the older batch at a tie):
    // a batch created while others run catches up with them instead of waiting for them to end.
    // Oldest batch first, one tenant's batch of 50,000 held every later one, another tenant's of
    // three included, for as long as it ran (test/batches/batch-fairness.test.ts).
    const claim = Effect.fn("BatchesRepo.claim")(function*(owner: string, ttlMs: number, limit: number) {
      if (limit <= 0) return []
      const rows = yield* sql<{ batch_id: string; idx: number; attempt: number; takeovers: number; custom_id: string }>`
        UPDATE batch_requests r SET state = 'running', lease_owner = ${owner}, lease_expires_at = ${ttl(ttlMs)}, attempt = r.attempt + 1,
          takeovers = r.takeovers + CASE WHEN r.state = 'running' THEN 1 ELSE 0 END
        WHERE (r.batch_id, r.idx) IN (
          SELECT q.batch_id, q.idx FROM batch_requests q JOIN batches b ON b.id = q.batch_id
          WHERE b.ended_at IS NULL AND b.cancel_initiated_at IS NULL AND b.expires_at > now()
            AND ((q.state = 'pending' AND (q.not_before IS NULL OR q.not_before <= now()))
              OR (q.state = 'running' AND q.lease_expires_at < now()))
          ORDER BY q.idx, b.created_at, q.batch_id LIMIT ${limit} FOR UPDATE OF q SKIP LOCKED
        ) RETURNING r.batch_id, r.idx, r.attempt, r.takeovers, r.custom_id`
      if (rows.length === 0) return []
      // Each request's params in a statement of its own, as bytes in pieces (`storedPieces`): a
      // request may be 16 MiB, and all of the claimed ones in one result were decoded in one turn
      // of the event loop.
      const params = yield* Effect.forEach(rows, (r) =>
        Effect.map(
          storedPieces(sql, sql`SELECT convert_to(params, 'UTF8') AS params FROM batch_requests WHERE batch_id = ${r.batch_id} AND idx = ${r.idx}`, ["params"]),
          (pieces) => pieces?.get("params")
        ))
      const ids = [...new Set(rows.map((r) => r.batch_id))]
      const batches = yield* sql<{ id: string; key_id: string; kind: BatchKind; endpoint: string }>`SELECT id, key_id, kind, endpoint FROM batches WHERE id IN ${sql.in(ids)}`
      const byId = new Map(batches.map((b) => [b.id, b]))
      return rows.flatMap((r, i): Array<BatchClaim> => {
        const b = byId.get(r.batch_id)
        const p = params[i]
        return b === undefined || p === undefined ? [] : [{
          batchId: r.batch_id,
          idx: Number(r.idx),
          attempt: Number(r.attempt),
          takeovers: Number(r.takeovers),
          customId: r.custom_id,
          params: p,
          keyId: b.key_id,
          kind: b.kind,
          endpoint: b.endpoint
        }]
      })
    })

    /** `finish`'s transaction (a generator made once, not per request: see `generator-closures.test.ts`). */
    const finishLocked = Effect.fnUntraced(function*(claim: BatchClaim, owner: string, outcome: RequestOutcome) {
      const row = yield* lockBatch(claim.batchId)
      if (row === undefined) return false
      const fence = sql`batch_id = ${claim.batchId} AND idx = ${claim.idx} AND state = 'running' AND lease_owner = ${owner} AND attempt = ${claim.attempt}`
      if (outcome._tag === "Requeue") {
        const state = restoreBatch(row.machine)
        // A stopped batch takes no retries: the request ends as the stop says.
        if (state.cancelRequested || state.expiryReached) {
          const result = state.expiryReached ? "expired" : "canceled"
          const ended = yield* sql`UPDATE batch_requests SET state = ${result}, ended_at = now(), lease_owner = NULL WHERE ${fence} RETURNING idx`
          if (ended.length === 0) return false
          yield* apply(row, [{ type: "request_ended", result }])
          return true
        }
        const requeued = yield* sql`UPDATE batch_requests SET state = 'pending', lease_owner = NULL, lease_expires_at = NULL,
          not_before = ${ttl(outcome.afterMs)} WHERE ${fence} RETURNING idx`
        return requeued.length > 0
      }
      const ended = yield* sql`UPDATE batch_requests SET state = ${outcome.state}, result = ${outcome.result}, ended_at = now(), lease_owner = NULL
        WHERE ${fence} RETURNING idx`
      if (ended.length === 0) return false
      yield* apply(row, [{ type: "request_ended", result: outcome.state }])
      return true
    })

    const finish = Effect.fn("BatchesRepo.finish")(function*(claim: BatchClaim, owner: string, outcome: RequestOutcome) {
      return yield* sql.withTransaction(finishLocked(claim, owner, outcome))
    })

    const renew = Effect.fn("BatchesRepo.renew")(function*(owner: string, ttlMs: number) {
      const rows = yield* sql<{ batch_id: string; idx: number; attempt: number }>`UPDATE batch_requests SET lease_expires_at = ${ttl(ttlMs)}
        WHERE lease_owner = ${owner} AND state = 'running' RETURNING batch_id, idx, attempt`
      return new Set(rows.map((r) => `${r.batch_id}:${r.idx}@${r.attempt}`))
    })

    const release = Effect.fn("BatchesRepo.release")(function*(owner: string) {
      yield* sql`UPDATE batch_requests SET lease_expires_at = now() WHERE lease_owner = ${owner} AND state = 'running'`
    })

    const releaseClaims = Effect.fn("BatchesRepo.releaseClaims")(function*(owner: string, claims: ReadonlyArray<string>) {
      for (const claim of claims) {
        const match = /^(.*):(\d+)@(\d+)$/.exec(claim)
        if (match === null) continue
        yield* sql`UPDATE batch_requests SET lease_expires_at = now()
          WHERE batch_id = ${match[1]} AND idx = ${Number(match[2])} AND attempt = ${Number(match[3])} AND lease_owner = ${owner} AND state = 'running'`
      }
    })

    /** Stops one due batch (expired, or cancelled with requests left on a dead worker); whether it changed. */
    const sweepOne = Effect.fnUntraced(function*(id: string, past: boolean) {
      const row = yield* lockBatch(id)
      if (row === undefined || row.ended_at !== null) return false
      const state = restoreBatch(row.machine)
      const events: Array<BatchEvent> = []
      const expiring = state.expiryReached || past
      if (expiring && !state.expiryReached) {
        const stopped = yield* sql`UPDATE batch_requests SET state = 'expired', ended_at = now()
          WHERE batch_id = ${id} AND state = 'pending' RETURNING idx`
        events.push({ type: "expire", stopped: stopped.length })
      }
      // In flight on a worker that died: nobody will answer them now.
      const result = expiring ? "expired" : "canceled"
      const orphans = yield* sql`UPDATE batch_requests SET state = ${result}, ended_at = now(), lease_owner = NULL
        WHERE batch_id = ${id} AND state = 'running' AND lease_expires_at < now() RETURNING idx`
      for (const _ of orphans) events.push({ type: "request_ended", result })
      if (events.length === 0) return false
      yield* apply(row, events)
      return true
    })

    const sweep = Effect.fn("BatchesRepo.sweep")(function*() {
      const due = yield* sql<{ id: string; past: boolean }>`SELECT id, expires_at <= now() AS past FROM batches WHERE ended_at IS NULL
        AND (expires_at <= now() OR cancel_initiated_at IS NOT NULL) LIMIT 100`
      let changed = 0
      for (const { id, past } of due) {
        if (yield* sql.withTransaction(sweepOne(id, past))) changed++
      }
      return changed
    })

    return BatchesRepo.of({ create, get, list, cancel, remove, forEachResultPage, claim, finish, renew, release, releaseClaims, sweep })
  }))
}
