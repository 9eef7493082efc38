/**
 * What every capacity-queue host offers and raises — the in-process one (capacity-queues.ts) and
 * the Redis one (redis-capacity-queues.ts) — in a module of its own, so that neither host imports
 * the other for its types.
 */
import type { Effect } from "effect"
import { Schema } from "effect"
import type { QueuePriority, QueueView, ReleaseOutcome } from "../../machines/queue.ts"

export type { QueuePriority }

/** No slot came free on any candidate before the deadline. */
export class QueueTimeout extends Schema.TaggedError<QueueTimeout>()("QueueTimeout", {
  message: Schema.String,
  waitedMs: Schema.Number,
  /** A hint for the client's `retry-after`: the estimated wait for the position it had. */
  retryAfterSeconds: Schema.Int
}) {}

/** `cancelled` frees the slot without a health verdict (client gone, lost race). */
export type LeaseOutcome = ReleaseOutcome | "cancelled"

export interface Lease {
  readonly placementId: string
  /**
   * Gives the slot back; idempotent (only the first call counts). On Redis the release is sent,
   * not awaited: this instance's later commands run after it, another instance may see the slot
   * held for the round trip's duration.
   */
  release(outcome: LeaseOutcome): Effect.Effect<void>
}

export interface AcquireOptions {
  /** Placement ids in preference order. */
  readonly candidates: ReadonlyArray<string>
  /** The fairness key (the API key's id): round-robin between keys, FIFO within one. */
  readonly keyId: string
  /** The longest this wait may take, in milliseconds (default: the service's, 10 minutes). */
  readonly deadlineMs?: number | undefined
  /** Runs once if no slot was free at once, e.g. to send headers and start keepalives. */
  readonly onQueued?: Effect.Effect<void> | undefined
  /**
   * `interactive` (default) or `batch`: a batch waiter is granted a slot only when no interactive
   * request waits for it, and batch requests never hold more than capacity − 1 slots of a
   * placement (machines/queue.ts).
   */
  readonly priority?: QueuePriority | undefined
  /** The call's admission, when it is still on its way (see `PendingAdmission`). */
  readonly admission?: PendingAdmission | undefined
}

/**
 * A call's metering sent to a remote store just before the acquire, not yet answered. On Redis the
 * first enqueue goes out behind it and carries `ticket`: it takes a slot only if the admission left
 * the ticket (the call was admitted), so admission and slot cost one round trip. Without the
 * ticket (refused, or admitted some other way) the acquire waits on `admitted` and enqueues as
 * usual; it never returns a lease before one or the other proved the call admitted. `admitted`
 * succeeds once the call is admitted and never fails: a caller whose call was refused interrupts
 * the acquire. The in-process queues just wait on `admitted` first.
 */
export interface PendingAdmission {
  readonly ticket: string
  readonly admitted: Effect.Effect<void>
}

export interface PlacementQueueView extends QueueView {
  readonly placementId: string
}

export interface CapacityQueuesOptions {
  readonly placements: ReadonlyArray<{ readonly placementId: string; readonly capacity: number }>
  /** Consecutive failures that open a circuit (default 3). */
  readonly failureThreshold?: number | undefined
  /** How long an open circuit waits before a half-open probe (default 30 s). */
  readonly probeCooldownMs?: number | undefined
  /** Default `deadlineMs` of `acquire` (default 10 minutes). */
  readonly defaultDeadlineMs?: number | undefined
}

export const DEFAULT_DEADLINE_MS = 10 * 60_000
export const DEFAULT_PROBE_COOLDOWN_MS = 30_000

export interface CapacityQueuesShape {
  acquire(options: AcquireOptions): Effect.Effect<Lease, QueueTimeout>
  view(): Effect.Effect<ReadonlyArray<PlacementQueueView>>
  isOpen(placementId: string): Effect.Effect<boolean>
  /** Config change: more capacity grants at once; less preempts nobody. */
  setCapacity(placementId: string, capacity: number): Effect.Effect<void>
}
