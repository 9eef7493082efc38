/**
 * The lifecycle of one batch (Messages batches and OpenAI batches alike), as a pure transition
 * function: no I/O, no clock. The repository (src/batches/batches-repo.ts) folds every event into
 * the batch row in the same transaction that changes the requests the event counts, so the counts
 * and the status a GET shows cannot disagree with the request rows.
 *
 * Phases:
 * - `validating`  (OpenAI only) the input file is being checked; `validated` → `in_progress`,
 *                 `validation_failed` → `ended` with outcome `failed`.
 * - `in_progress` requests are being executed; each `request_ended` moves one request from
 *                 `processing` to its result. When none is left processing: `finalizing`
 *                 (OpenAI, which writes its output files) or `ended` (Messages).
 * - `cancelling`  entered by `cancel` (which names how many unclaimed requests it stopped at once);
 *                 in-flight requests still finish; ends like `in_progress` with outcome `cancelled`.
 * - expiry       `expire` (the window passed) stops the unclaimed requests as `expired`; in-flight
 *                 ones finish; the outcome is `expired` (it wins over a cancel).
 * - `finalizing`  `finalized` → `ended`.
 * - `ended`       final; nothing changes it.
 *
 * Every event outside the phase that accepts it leaves the state unchanged (`changed: false`), so
 * a repeated cancel or a late expiry is harmless.
 */

export type BatchKind = "messages" | "openai"
type BatchPhase = "validating" | "in_progress" | "cancelling" | "finalizing" | "ended"
type BatchOutcome = "completed" | "failed" | "cancelled" | "expired"
type RequestResult = "succeeded" | "errored" | "canceled" | "expired"

export interface BatchCounts {
  /** Not ended yet: waiting or in flight. */
  readonly processing: number
  readonly succeeded: number
  readonly errored: number
  readonly canceled: number
  readonly expired: number
}

export interface BatchState {
  readonly kind: BatchKind
  readonly phase: BatchPhase
  readonly total: number
  readonly counts: BatchCounts
  readonly cancelRequested: boolean
  readonly expiryReached: boolean
  /** Set once the batch leaves `in_progress`/`cancelling` for good. */
  readonly outcome: BatchOutcome | null
}

export type BatchEvent =
  | { readonly type: "validated"; readonly total: number }
  | { readonly type: "validation_failed" }
  /** One request ended: answered (`succeeded`, `errored`), or stopped in flight (`canceled`, `expired`). */
  | { readonly type: "request_ended"; readonly result: RequestResult }
  /** `stopped`: how many unclaimed requests the cancel ended as `canceled`. */
  | { readonly type: "cancel"; readonly stopped: number }
  /** `stopped`: how many unclaimed requests the expiry ended as `expired`. */
  | { readonly type: "expire"; readonly stopped: number }
  | { readonly type: "finalized" }

export interface Step {
  readonly state: BatchState
  readonly changed: boolean
}

const zero: BatchCounts = { processing: 0, succeeded: 0, errored: 0, canceled: 0, expired: 0 }

/** A new batch: Messages batches start `in_progress` with every request processing. */
export const startBatch = (kind: BatchKind, total: number): BatchState =>
  kind === "messages"
    ? { kind, phase: "in_progress", total, counts: { ...zero, processing: total }, cancelRequested: false, expiryReached: false, outcome: null }
    : { kind, phase: "validating", total: 0, counts: zero, cancelRequested: false, expiryReached: false, outcome: null }

const live = (state: BatchState) => state.phase === "in_progress" || state.phase === "cancelling"

/** When nothing is left processing, a live batch moves on: OpenAI writes its files first. */
const settle = (state: BatchState): BatchState => {
  if (!live(state) || state.counts.processing > 0) return state
  const outcome: BatchOutcome = state.expiryReached ? "expired" : state.cancelRequested ? "cancelled" : "completed"
  return { ...state, phase: state.kind === "openai" ? "finalizing" : "ended", outcome }
}

const same = (state: BatchState): Step => ({ state, changed: false })
const to = (state: BatchState): Step => ({ state, changed: true })

export const stepBatch = (state: BatchState, event: BatchEvent): Step => {
  switch (event.type) {
    case "validated":
      if (state.phase !== "validating") return same(state)
      return to(settle({ ...state, phase: "in_progress", total: event.total, counts: { ...zero, processing: event.total } }))
    case "validation_failed":
      if (state.phase !== "validating") return same(state)
      return to({ ...state, phase: "ended", outcome: "failed" })
    case "request_ended": {
      if (!live(state) || state.counts.processing === 0) return same(state)
      const counts = { ...state.counts, processing: state.counts.processing - 1, [event.result]: state.counts[event.result] + 1 }
      return to(settle({ ...state, counts }))
    }
    case "cancel": {
      if (!live(state) || state.cancelRequested) return same(state)
      const stopped = Math.min(Math.max(0, event.stopped), state.counts.processing)
      const counts = { ...state.counts, processing: state.counts.processing - stopped, canceled: state.counts.canceled + stopped }
      return to(settle({ ...state, phase: "cancelling", cancelRequested: true, counts }))
    }
    case "expire": {
      if (!live(state) || state.expiryReached) return same(state)
      const stopped = Math.min(Math.max(0, event.stopped), state.counts.processing)
      const counts = { ...state.counts, processing: state.counts.processing - stopped, expired: state.counts.expired + stopped }
      return to(settle({ ...state, expiryReached: true, counts }))
    }
    case "finalized":
      if (state.phase !== "finalizing") return same(state)
      return to({ ...state, phase: "ended" })
  }
}

/** Anthropic's `processing_status`. */
export const messagesStatus = (state: BatchState): "in_progress" | "canceling" | "ended" =>
  state.phase === "ended" || state.phase === "finalizing" ? "ended" : state.cancelRequested ? "canceling" : "in_progress"

export type OpenAiBatchStatus = "validating" | "failed" | "in_progress" | "finalizing" | "completed" | "expired" | "cancelling" | "cancelled"

/** OpenAI's `status`: a cancel shows `cancelling` until the batch has ended. */
export const openaiStatus = (state: BatchState): OpenAiBatchStatus => {
  switch (state.phase) {
    case "validating":
      return "validating"
    case "ended":
      return state.outcome ?? "failed"
    case "finalizing":
      return state.cancelRequested && !state.expiryReached ? "cancelling" : "finalizing"
    case "cancelling":
      return "cancelling"
    case "in_progress":
      return "in_progress"
  }
}

/** The state as stored (jsonb) and read back; anything unreadable is a defect, not input. */
export const restoreBatch = (value: unknown): BatchState => value as BatchState
