/**
 * The capacity queue of ONE placement, as a pure transition function: no I/O, no timers, no
 * randomness. `stepQueue(state, event)` returns the next state and the waiters it granted a slot.
 * The host (src/runtime/capacity-queues.ts) reports every event, including the circuit's cooldown
 * (`CIRCUIT_PROBE_DUE`); `queueLogic` wraps the same function as XState transition logic, so
 * `xstate/graph` walks every path and the same paths drive the real host. (Not an XState actor:
 * a request's enqueue and release through one measured ≈17 µs, against ~1 µs here.)
 *
 * Slots: `capacity` requests hold a slot at once. A free slot goes to the next waiter at once; the
 * step that grants it lists the waiter in `granted`.
 * A capacity lowered below the slots in use preempts nobody; grants resume once below it.
 *
 * Fairness — round-robin between keys, FIFO within a key. Waiters sit in one lane per key; the
 * lanes form a ring and `lanes[0]` is served next. After a grant its lane moves to the back of
 * the ring (or leaves it when empty); a key that starts waiting joins at the back. So while a key
 * has waiters, each other key gets at most one grant before it does (with K waiting keys a
 * waiter's key is served within K-1 grants), however many requests a flooding key queues.
 * We chose round-robin over virtual time because every request occupies one slot for an unknown
 * time: there is no cost to weigh, and the ring is easy to state and to check.
 *
 * Priority — `interactive` (the default) and `batch`. Batch waiters sit in a ring of their own
 * (`batchLanes`, same fairness) and are served only when no interactive request waits: an
 * interactive waiter gets the next free slot ahead of every batch waiter. Batch requests hold at
 * most capacity − 1 slots (`batchHolders`), so one slot is always left to interactive traffic and
 * batch work never holds more than capacity − 1 slots while interactive requests wait. (A placement
 * of capacity 1 lets a batch request take its one slot when it is idle: an interactive arrival
 * then waits at most that request's service time.) Nothing is preempted.
 *
 * Circuit (the placement's health) is the state value:
 * - `closed`: normal. `failureThreshold` consecutive `failure` releases (default 3) → `open`;
 *   a `success` release resets the count.
 * - `open`: grants nothing; waiters keep waiting unless cancelled (the dispatcher prefers other
 *   candidates). Releases of calls granted before opening free their slot but say nothing about
 *   health. The host starts its cooldown timer on entry and then sends `CIRCUIT_PROBE_DUE`.
 * - `halfOpen`: grants exactly one probe (the next waiter by the fairness policy). The probe's
 *   `success` closes the circuit (and fills the free slots); its `failure` re-opens it; a
 *   cancelled probe is replaced by the next waiter.
 *
 * `CANCEL` removes a waiter (client gone, deadline passed, served by another placement); sent
 * for a slot holder it frees the slot without a health verdict (a grant that lost the race).
 * `RELEASE` for an unknown or already released waiter is ignored, so releases are idempotent.
 */
import { fromTransition } from "xstate"

export type ReleaseOutcome = "success" | "failure"
export type QueuePriority = "interactive" | "batch"
export type CircuitState = "closed" | "open" | "halfOpen"

/** Waiters of one key, oldest first. */
export interface Lane {
  readonly keyId: string
  readonly waiterIds: ReadonlyArray<string>
}

export interface QueueStats {
  readonly enqueued: number
  readonly granted: number
  readonly cancelled: number
  readonly succeeded: number
  readonly failed: number
  readonly opened: number
}

export interface QueueContext {
  readonly capacity: number
  readonly failureThreshold: number
  /** Waiter ids holding a slot. */
  readonly holders: ReadonlyArray<string>
  /** The round-robin ring of keys with waiters; `lanes[0]` is served next. */
  readonly lanes: ReadonlyArray<Lane>
  /** The same ring for batch waiters, served only when `lanes` is empty. */
  readonly batchLanes: ReadonlyArray<Lane>
  /** The holders (also in `holders`) that are batch requests. */
  readonly batchHolders: ReadonlyArray<string>
  /** The half-open probe in flight, if any. */
  readonly probe: string | null
  readonly consecutiveFailures: number
  readonly stats: QueueStats
}

export type QueueEvent =
  | { readonly type: "ENQUEUE"; readonly waiterId: string; readonly keyId: string; readonly priority?: QueuePriority }
  | { readonly type: "CANCEL"; readonly waiterId: string }
  | { readonly type: "RELEASE"; readonly waiterId: string; readonly outcome: ReleaseOutcome }
  | { readonly type: "CAPACITY"; readonly capacity: number }
  | { readonly type: "CIRCUIT_PROBE_DUE" }

export type QueueEmitted = { readonly type: "granted"; readonly waiterId: string }

export interface QueueInput {
  readonly capacity: number
  readonly failureThreshold?: number
}

export const DEFAULT_FAILURE_THRESHOLD = 3

// --- pure helpers on the context ------------------------------------------------------------

const inLanes = (lanes: ReadonlyArray<Lane>, waiterId: string) => lanes.some((lane) => lane.waiterIds.includes(waiterId))
const isWaiting = (context: QueueContext, waiterId: string) => inLanes(context.lanes, waiterId) || inLanes(context.batchLanes, waiterId)
const isHolder = (context: QueueContext, waiterId: string) => context.holders.includes(waiterId)
const bump = (stats: QueueStats, key: keyof QueueStats): QueueStats => ({ ...stats, [key]: stats[key] + 1 })

const joinRing = (lanes: ReadonlyArray<Lane>, waiterId: string, keyId: string): ReadonlyArray<Lane> =>
  lanes.some((lane) => lane.keyId === keyId)
    ? lanes.map((lane) => lane.keyId === keyId ? { keyId, waiterIds: [...lane.waiterIds, waiterId] } : lane)
    : [...lanes, { keyId, waiterIds: [waiterId] }]

const addWaiter = (context: QueueContext, waiterId: string, keyId: string, priority: QueuePriority): QueueContext =>
  priority === "batch"
    ? { ...context, batchLanes: joinRing(context.batchLanes, waiterId, keyId), stats: bump(context.stats, "enqueued") }
    : { ...context, lanes: joinRing(context.lanes, waiterId, keyId), stats: bump(context.stats, "enqueued") }

const leaveRing = (lanes: ReadonlyArray<Lane>, waiterId: string): ReadonlyArray<Lane> =>
  lanes
    .map((lane) => ({ keyId: lane.keyId, waiterIds: lane.waiterIds.filter((id) => id !== waiterId) }))
    .filter((lane) => lane.waiterIds.length > 0)

const removeWaiter = (context: QueueContext, waiterId: string): QueueContext => ({
  ...context,
  lanes: leaveRing(context.lanes, waiterId),
  batchLanes: leaveRing(context.batchLanes, waiterId)
})

const removeHolder = (context: QueueContext, waiterId: string): QueueContext => ({
  ...context,
  holders: context.holders.filter((id) => id !== waiterId),
  batchHolders: context.batchHolders.filter((id) => id !== waiterId),
  probe: context.probe === waiterId ? null : context.probe
})

/** The most slots batch requests may hold: all but one (a placement of capacity 1: its one slot). */
export const batchCap = (capacity: number) => capacity >= 2 ? capacity - 1 : capacity

/**
 * Grants up to `limit` free slots by the fairness policy, interactive waiters first; returns the
 * new context and who got one.
 */
const fill = (context: QueueContext, limit: number): { context: QueueContext; granted: Array<string> } => {
  let next = context
  const granted: Array<string> = []
  while (granted.length < limit && next.holders.length < next.capacity) {
    const batch = next.lanes.length === 0
    if (batch && (next.batchLanes.length === 0 || next.batchHolders.length >= batchCap(next.capacity))) break
    const ring = batch ? next.batchLanes : next.lanes
    const [head, ...rest] = ring
    const [waiterId, ...remaining] = head.waiterIds
    const lanes = remaining.length > 0 ? [...rest, { keyId: head.keyId, waiterIds: remaining }] : rest
    next = batch
      ? { ...next, batchLanes: lanes, holders: [...next.holders, waiterId], batchHolders: [...next.batchHolders, waiterId], stats: bump(next.stats, "granted") }
      : { ...next, lanes, holders: [...next.holders, waiterId], stats: bump(next.stats, "granted") }
    granted.push(waiterId)
  }
  return { context: next, granted }
}

/** A step's result: the next state and the waiters granted a slot by it, in grant order. */
export interface QueueStep {
  readonly state: QueueState
  readonly granted: ReadonlyArray<string>
}

export interface QueueState {
  /** The circuit. */
  readonly value: CircuitState
  readonly context: QueueContext
}

const isNewWaiter = (context: QueueContext, event: { waiterId: unknown; keyId: unknown }) =>
  typeof event.waiterId === "string" && typeof event.keyId === "string" &&
  !isWaiting(context, event.waiterId) && !isHolder(context, event.waiterId)

const cancel = (context: QueueContext, waiterId: string): QueueContext =>
  isWaiting(context, waiterId)
    ? { ...removeWaiter(context, waiterId), stats: bump(context.stats, "cancelled") }
    : isHolder(context, waiterId)
    ? removeHolder(context, waiterId)
    : context

/** Frees the slot and, while closed, keeps the consecutive-failure count. */
const release = (context: QueueContext, waiterId: string, outcome: ReleaseOutcome): QueueContext => {
  const success = outcome === "success"
  return {
    ...removeHolder(context, waiterId),
    consecutiveFailures: success ? 0 : context.consecutiveFailures + 1,
    stats: bump(context.stats, success ? "succeeded" : "failed")
  }
}

const unchanged = (state: QueueState): QueueStep => ({ state, granted: [] })

/** Closed: every free slot goes to the next waiter by the fairness policy. */
const closed = (context: QueueContext): QueueStep => {
  const { context: next, granted } = fill(context, Number.POSITIVE_INFINITY)
  return { state: { value: "closed", context: next }, granted }
}

/** Half-open: one probe at a time. */
const halfOpen = (context: QueueContext): QueueStep => {
  if (context.probe !== null) return { state: { value: "halfOpen", context }, granted: [] }
  const { context: next, granted } = fill(context, 1)
  return { state: { value: "halfOpen", context: granted.length === 0 ? context : { ...next, probe: granted[0] } }, granted }
}

const open = (context: QueueContext): QueueStep => ({ state: { value: "open", context }, granted: [] })

const opening = (context: QueueContext): QueueStep => open({ ...context, stats: bump(context.stats, "opened") })

const validCapacity = (capacity: unknown) => Number.isInteger(capacity) && (capacity as number) >= 0

export const startQueue = (input: QueueInput): QueueState => ({
  value: "closed",
  context: {
    capacity: input.capacity,
    failureThreshold: input.failureThreshold ?? DEFAULT_FAILURE_THRESHOLD,
    holders: [],
    lanes: [],
    batchLanes: [],
    batchHolders: [],
    probe: null,
    consecutiveFailures: 0,
    stats: { enqueued: 0, granted: 0, cancelled: 0, succeeded: 0, failed: 0, opened: 0 }
  }
})

/** The next state and the grants it makes; an event the state does not take changes nothing. */
export const stepQueue = (state: QueueState, event: QueueEvent): QueueStep => {
  switch (state.value) {
    case "closed":
      return stepClosed(state, event)
    case "open":
      return stepOpen(state, event)
    case "halfOpen":
      return stepHalfOpen(state, event)
  }
}

const stepClosed = (state: QueueState, event: QueueEvent): QueueStep => {
  const { context } = state
  switch (event.type) {
    case "ENQUEUE":
      return isNewWaiter(context, event) ? closed(addWaiter(context, event.waiterId, event.keyId, event.priority ?? "interactive")) : unchanged(state)
    case "CANCEL":
      return closed(cancel(context, event.waiterId))
    case "CAPACITY":
      return validCapacity(event.capacity) ? closed({ ...context, capacity: event.capacity }) : unchanged(state)
    case "RELEASE":
      if (!isHolder(context, event.waiterId)) return unchanged(state)
      if (event.outcome === "failure" && context.consecutiveFailures + 1 >= context.failureThreshold) {
        return opening(release(context, event.waiterId, event.outcome))
      }
      return closed(release(context, event.waiterId, event.outcome))
    case "CIRCUIT_PROBE_DUE":
      return unchanged(state)
  }
}

const stepOpen = (state: QueueState, event: QueueEvent): QueueStep => {
  const { context } = state
  switch (event.type) {
    case "ENQUEUE":
      return isNewWaiter(context, event) ? open(addWaiter(context, event.waiterId, event.keyId, event.priority ?? "interactive")) : unchanged(state)
    case "CANCEL":
      return open(cancel(context, event.waiterId))
    case "CAPACITY":
      return validCapacity(event.capacity) ? open({ ...context, capacity: event.capacity }) : unchanged(state)
    case "RELEASE":
      // A call granted before the circuit opened: its slot is freed, its outcome not counted.
      return isHolder(context, event.waiterId) ? open(removeHolder(context, event.waiterId)) : unchanged(state)
    case "CIRCUIT_PROBE_DUE":
      return halfOpen(context)
  }
}

const stepHalfOpen = (state: QueueState, event: QueueEvent): QueueStep => {
  const { context } = state
  switch (event.type) {
    case "ENQUEUE":
      return isNewWaiter(context, event) ? halfOpen(addWaiter(context, event.waiterId, event.keyId, event.priority ?? "interactive")) : unchanged(state)
    case "CANCEL":
      return halfOpen(cancel(context, event.waiterId))
    case "CAPACITY":
      return validCapacity(event.capacity) ? halfOpen({ ...context, capacity: event.capacity }) : unchanged(state)
    case "RELEASE":
      if (context.probe === event.waiterId) {
        const released = release(context, event.waiterId, event.outcome)
        return event.outcome === "success" ? closed({ ...released, consecutiveFailures: 0 }) : opening(released)
      }
      return isHolder(context, event.waiterId) ? halfOpen(removeHolder(context, event.waiterId)) : unchanged(state)
    case "CIRCUIT_PROBE_DUE":
      return unchanged(state)
  }
}

/** The same rules as XState transition logic, for `xstate/graph` (model-based tests). */
export const queueLogic = fromTransition(
  (state: QueueState, event: QueueEvent) => stepQueue(state, event).state,
  ({ input }: { input: QueueInput }) => startQueue(input)
)

export interface QueueView {
  readonly capacity: number
  readonly inUse: number
  readonly waiting: number
  readonly waitingByKey: Readonly<Record<string, number>>
  readonly circuit: CircuitState
}

export const queueView = (state: QueueState): QueueView => {
  const { context } = state
  return {
    capacity: context.capacity,
    inUse: context.holders.length,
    waiting: [...context.lanes, ...context.batchLanes].reduce((sum, lane) => sum + lane.waiterIds.length, 0),
    waitingByKey: [...context.lanes, ...context.batchLanes].reduce<Record<string, number>>((byKey, lane) => {
      byKey[lane.keyId] = (byKey[lane.keyId] ?? 0) + lane.waiterIds.length
      return byKey
    }, {}),
    circuit: state.value
  }
}

/**
 * How many grants go to others before `waiterId`, if nobody else arrives or leaves (the ring
 * serves one waiter per lane per round). `undefined` when the waiter is not waiting.
 */
export const positionOf = (context: QueueContext, waiterId: string): number | undefined => {
  const ahead = ringPosition(context.lanes, waiterId)
  if (ahead !== undefined) return ahead
  // A batch waiter: after every interactive waiter, then by its own ring.
  const inBatch = ringPosition(context.batchLanes, waiterId)
  return inBatch === undefined ? undefined : context.lanes.reduce((sum, lane) => sum + lane.waiterIds.length, 0) + inBatch
}

const ringPosition = (lanes: ReadonlyArray<Lane>, waiterId: string): number | undefined => {
  const laneIndex = lanes.findIndex((lane) => lane.waiterIds.includes(waiterId))
  if (laneIndex < 0) return undefined
  const round = lanes[laneIndex].waiterIds.indexOf(waiterId)
  return lanes.reduce(
    (ahead, lane, index) => ahead + Math.min(lane.waiterIds.length, round) + (index < laneIndex && lane.waiterIds.length > round ? 1 : 0),
    0
  )
}
