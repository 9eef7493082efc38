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
import { HashMap, Option } from "effect"
import { fromTransition } from "xstate"
import { type Fifo, emptyFifo, fifoItems, popFifo, pushFifo } from "./persistent-fifo.ts"

export type ReleaseOutcome = "success" | "failure"
export type QueuePriority = "interactive" | "batch"
export type CircuitState = "closed" | "open" | "halfOpen"

/** Waiters of one key, oldest first. */
interface Lane {
  readonly keyId: string
  readonly waiterIds: ReadonlyArray<string>
}

interface QueueStats {
  readonly enqueued: number
  readonly granted: number
  readonly cancelled: number
  readonly succeeded: number
  readonly failed: number
  readonly opened: number
}

/*
 * Storage. Every step returns a new context and leaves the old one valid (the model tests branch
 * from one state many times), yet no step copies the waiters: a deep queue (thousands of waiters)
 * must not cost O(n) per event. So the waiters are persistent structures:
 * - `waiting`: waiterId → its key, class and arrival number (`seq`, the `enqueued` count at its
 *   arrival), a HAMT (effect's HashMap): O(log n) lookup, insert, remove with structural sharing.
 * - a ring per class: a persistent FIFO of lane tickets (`RingTicket`) in serving order, and
 *   keyId → lane; a lane holds a persistent FIFO of its waiters' entries and how many are live.
 * Removal is lazy: a cancelled waiter leaves `waiting` and its lane's count at once, and its FIFO
 * entry is skipped when it reaches the head (an entry is live while `waiting` still has its id with
 * the same `seq`). A lane emptied by cancels leaves the lanes map; its ticket is skipped likewise
 * (a ticket is live while its key's lane has the ticket's `gen`, the `seq` that opened the lane).
 * - `holding`: waiterId → grant number and class; holders are few (≤ capacity) but looked up by id.
 * The plain arrays (ring order, FIFO order, grant order) are derived on demand by `queueContents`
 * for the tests, the admin view and the retry hint — never per event.
 */
interface Waiting {
  readonly keyId: string
  readonly batch: boolean
  readonly seq: number
}

interface LaneEntry {
  readonly waiterId: string
  readonly seq: number
}

interface LaneState {
  readonly gen: number
  readonly entries: Fifo<LaneEntry>
  /** Live entries (the others were cancelled). */
  readonly count: number
}

interface RingTicket {
  readonly keyId: string
  readonly gen: number
}

interface Ring {
  readonly tickets: Fifo<RingTicket>
  readonly lanes: HashMap.HashMap<string, LaneState>
  /** Live waiters in all lanes. */
  readonly waiting: number
}

interface Holding {
  readonly grant: number
  readonly batch: boolean
}

export interface QueueContext {
  readonly capacity: number
  readonly failureThreshold: number
  readonly waiting: HashMap.HashMap<string, Waiting>
  /** The round-robin ring of interactive waiters. */
  readonly ring: Ring
  /** The same ring for batch waiters, served only when `ring` is empty. */
  readonly batchRing: Ring
  /** The waiters holding a slot. */
  readonly holding: HashMap.HashMap<string, Holding>
  readonly inUse: number
  /** The holders that are batch requests. */
  readonly batchInUse: number
  /** The half-open probe in flight, if any. */
  readonly probe: string | null
  readonly consecutiveFailures: number
  readonly stats: QueueStats
}

/** The waiters and holders as plain arrays, in serving and grant order. */
export interface QueueContents {
  /** Waiter ids holding a slot, in grant order. */
  readonly holders: ReadonlyArray<string>
  /** The holders (also in `holders`) that are batch requests. */
  readonly batchHolders: ReadonlyArray<string>
  /** The round-robin ring of keys with waiters; `lanes[0]` is served next. */
  readonly lanes: ReadonlyArray<Lane>
  /** The same ring for batch waiters. */
  readonly batchLanes: ReadonlyArray<Lane>
}

export type QueueEvent =
  | { readonly type: "ENQUEUE"; readonly waiterId: string; readonly keyId: string; readonly priority?: QueuePriority }
  | { readonly type: "CANCEL"; readonly waiterId: string }
  | { readonly type: "RELEASE"; readonly waiterId: string; readonly outcome: ReleaseOutcome }
  | { readonly type: "CAPACITY"; readonly capacity: number }
  | { readonly type: "CIRCUIT_PROBE_DUE" }

export interface QueueInput {
  readonly capacity: number
  readonly failureThreshold?: number
}

export const DEFAULT_FAILURE_THRESHOLD = 3

// --- the rings --------------------------------------------------------------------------------

const emptyRing = (): Ring => ({ tickets: emptyFifo(), lanes: HashMap.empty(), waiting: 0 })

const joinRing = (ring: Ring, waiterId: string, keyId: string, seq: number): Ring => {
  const lane = Option.getOrUndefined(HashMap.get(ring.lanes, keyId))
  const entry = { waiterId, seq }
  if (lane !== undefined) {
    const joined = { gen: lane.gen, entries: pushFifo(lane.entries, entry), count: lane.count + 1 }
    return { tickets: ring.tickets, lanes: HashMap.set(ring.lanes, keyId, joined), waiting: ring.waiting + 1 }
  }
  // A key that starts waiting joins the ring at the back.
  const opened = { gen: seq, entries: pushFifo(emptyFifo<LaneEntry>(), entry), count: 1 }
  return { tickets: pushFifo(ring.tickets, { keyId, gen: seq }), lanes: HashMap.set(ring.lanes, keyId, opened), waiting: ring.waiting + 1 }
}

/** One waiter of `keyId` left (already removed from `waiting`); its entry is skipped later. */
const leaveRing = (ring: Ring, keyId: string): Ring => {
  const lane = Option.getOrThrow(HashMap.get(ring.lanes, keyId))
  const lanes = lane.count === 1 ? HashMap.remove(ring.lanes, keyId) : HashMap.set(ring.lanes, keyId, { ...lane, count: lane.count - 1 })
  return { tickets: ring.tickets, lanes, waiting: ring.waiting - 1 }
}

const liveLane = (ring: Ring, ticket: RingTicket): LaneState | undefined => {
  const lane = Option.getOrUndefined(HashMap.get(ring.lanes, ticket.keyId))
  return lane !== undefined && lane.gen === ticket.gen ? lane : undefined
}

const isLiveEntry = (waiting: HashMap.HashMap<string, Waiting>, entry: LaneEntry) =>
  Option.getOrUndefined(HashMap.get(waiting, entry.waiterId))?.seq === entry.seq

/**
 * Takes the next waiter of a non-empty ring: the head of the first live lane, whose lane then
 * moves to the back of the ring (or leaves it when empty). The caller removes it from `waiting`.
 */
const takeFromRing = (ring: Ring, waiting: HashMap.HashMap<string, Waiting>): { ring: Ring; waiterId: string } => {
  let tickets = ring.tickets
  for (;;) {
    const [ticket, rest] = popFifo(tickets)
    tickets = rest
    const lane = liveLane(ring, ticket)
    if (lane === undefined) continue
    let entries = lane.entries
    for (;;) {
      const [entry, after] = popFifo(entries)
      entries = after
      if (!isLiveEntry(waiting, entry)) continue
      const { keyId } = ticket
      if (lane.count === 1) return { ring: { tickets, lanes: HashMap.remove(ring.lanes, keyId), waiting: ring.waiting - 1 }, waiterId: entry.waiterId }
      const lanes = HashMap.set(ring.lanes, keyId, { gen: lane.gen, entries, count: lane.count - 1 })
      return { ring: { tickets: pushFifo(tickets, ticket), lanes, waiting: ring.waiting - 1 }, waiterId: entry.waiterId }
    }
  }
}

const ringLanes = (ring: Ring, waiting: HashMap.HashMap<string, Waiting>): Array<Lane> => {
  const lanes: Array<Lane> = []
  for (const ticket of fifoItems(ring.tickets)) {
    const lane = liveLane(ring, ticket)
    if (lane === undefined) continue
    const waiterIds = fifoItems(lane.entries).filter((entry) => isLiveEntry(waiting, entry)).map((entry) => entry.waiterId)
    lanes.push({ keyId: ticket.keyId, waiterIds })
  }
  return lanes
}

const contentsCache = new WeakMap<QueueContext, QueueContents>()

/**
 * The waiters and holders of a context as plain arrays: O(n), for the tests, the admin view and
 * the retry hint, never for a step. Memoized per context, so repeated calls return the same arrays.
 */
export const queueContents = (context: QueueContext): QueueContents => {
  const cached = contentsCache.get(context)
  if (cached !== undefined) return cached
  const holding = [...context.holding].sort(([, a], [, b]) => a.grant - b.grant)
  const contents: QueueContents = {
    holders: holding.map(([id]) => id),
    batchHolders: holding.filter(([, h]) => h.batch).map(([id]) => id),
    lanes: ringLanes(context.ring, context.waiting),
    batchLanes: ringLanes(context.batchRing, context.waiting)
  }
  contentsCache.set(context, contents)
  return contents
}

// --- pure helpers on the context ------------------------------------------------------------

const isWaiting = (context: QueueContext, waiterId: string) => HashMap.has(context.waiting, waiterId)
const isHolder = (context: QueueContext, waiterId: string) => HashMap.has(context.holding, waiterId)
const bump = (stats: QueueStats, key: keyof QueueStats): QueueStats => ({ ...stats, [key]: stats[key] + 1 })

const addWaiter = (context: QueueContext, waiterId: string, keyId: string, priority: QueuePriority): QueueContext => {
  const seq = context.stats.enqueued
  const batch = priority === "batch"
  const waiting = HashMap.set(context.waiting, waiterId, { keyId, batch, seq })
  const stats = bump(context.stats, "enqueued")
  return batch
    ? { ...context, waiting, batchRing: joinRing(context.batchRing, waiterId, keyId, seq), stats }
    : { ...context, waiting, ring: joinRing(context.ring, waiterId, keyId, seq), stats }
}

const removeWaiter = (context: QueueContext, waiterId: string): QueueContext => {
  const { keyId, batch } = Option.getOrThrow(HashMap.get(context.waiting, waiterId))
  const waiting = HashMap.remove(context.waiting, waiterId)
  return batch
    ? { ...context, waiting, batchRing: leaveRing(context.batchRing, keyId) }
    : { ...context, waiting, ring: leaveRing(context.ring, keyId) }
}

const removeHolder = (context: QueueContext, waiterId: string): QueueContext => {
  const held = Option.getOrUndefined(HashMap.get(context.holding, waiterId))
  if (held === undefined) return context
  return {
    ...context,
    holding: HashMap.remove(context.holding, waiterId),
    inUse: context.inUse - 1,
    batchInUse: held.batch ? context.batchInUse - 1 : context.batchInUse,
    probe: context.probe === waiterId ? null : context.probe
  }
}

/** The most slots batch requests may hold: all but one (a placement of capacity 1: its one slot). */
export const batchCap = (capacity: number) => capacity >= 2 ? capacity - 1 : capacity

/**
 * Grants up to `limit` free slots by the fairness policy, interactive waiters first; returns the
 * new context and who got one.
 */
const fill = (context: QueueContext, limit: number): { context: QueueContext; granted: Array<string> } => {
  let next = context
  const granted: Array<string> = []
  while (granted.length < limit && next.inUse < next.capacity) {
    const batch = next.ring.waiting === 0
    if (batch && (next.batchRing.waiting === 0 || next.batchInUse >= batchCap(next.capacity))) break
    const { ring, waiterId } = takeFromRing(batch ? next.batchRing : next.ring, next.waiting)
    const holding = HashMap.set(next.holding, waiterId, { grant: next.stats.granted, batch })
    const waiting = HashMap.remove(next.waiting, waiterId)
    const stats = bump(next.stats, "granted")
    next = batch
      ? { ...next, batchRing: ring, waiting, holding, inUse: next.inUse + 1, batchInUse: next.batchInUse + 1, stats }
      : { ...next, ring, waiting, holding, inUse: next.inUse + 1, stats }
    granted.push(waiterId)
  }
  return { context: next, granted }
}

/**
 * A newcomer when nobody waits and a slot is free (and, for batch work, batch is under its cap):
 * the slot is its at once — what `addWaiter` and then `fill` would give, without the trip through
 * a lane and the ring (most requests find a slot free, and this step runs on every one). Else
 * undefined: it joins the queue.
 */
const grantAtOnce = (context: QueueContext, waiterId: string, priority: QueuePriority): QueueContext | undefined => {
  if (context.ring.waiting > 0 || context.batchRing.waiting > 0 || context.inUse >= context.capacity) return undefined
  const batch = priority === "batch"
  if (batch && context.batchInUse >= batchCap(context.capacity)) return undefined
  const { stats } = context
  return {
    ...context,
    holding: HashMap.set(context.holding, waiterId, { grant: stats.granted, batch }),
    inUse: context.inUse + 1,
    batchInUse: batch ? context.batchInUse + 1 : context.batchInUse,
    stats: { ...stats, enqueued: stats.enqueued + 1, granted: stats.granted + 1 }
  }
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
    waiting: HashMap.empty(),
    ring: emptyRing(),
    batchRing: emptyRing(),
    holding: HashMap.empty(),
    inUse: 0,
    batchInUse: 0,
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
    case "ENQUEUE": {
      if (!isNewWaiter(context, event)) return unchanged(state)
      const priority = event.priority ?? "interactive"
      const granted = grantAtOnce(context, event.waiterId, priority)
      if (granted !== undefined) return { state: { value: "closed", context: granted }, granted: [event.waiterId] }
      return closed(addWaiter(context, event.waiterId, event.keyId, priority))
    }
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
    case "ENQUEUE": {
      if (!isNewWaiter(context, event)) return unchanged(state)
      const priority = event.priority ?? "interactive"
      // The one probe, when none is out.
      const granted = context.probe === null ? grantAtOnce(context, event.waiterId, priority) : undefined
      if (granted !== undefined) return { state: { value: "halfOpen", context: { ...granted, probe: event.waiterId } }, granted: [event.waiterId] }
      return halfOpen(addWaiter(context, event.waiterId, event.keyId, priority))
    }
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
  const waitingByKey: Record<string, number> = {}
  for (const ring of [context.ring, context.batchRing]) {
    for (const [keyId, lane] of ring.lanes) waitingByKey[keyId] = (waitingByKey[keyId] ?? 0) + lane.count
  }
  return {
    capacity: context.capacity,
    inUse: context.inUse,
    waiting: context.ring.waiting + context.batchRing.waiting,
    waitingByKey,
    circuit: state.value
  }
}

/**
 * How many grants go to others before `waiterId`, if nobody else arrives or leaves (the ring
 * serves one waiter per lane per round). `undefined` when the waiter is not waiting.
 */
export const positionOf = (context: QueueContext, waiterId: string): number | undefined => {
  const waiter = Option.getOrUndefined(HashMap.get(context.waiting, waiterId))
  if (waiter === undefined) return undefined
  const { lanes, batchLanes } = queueContents(context)
  if (!waiter.batch) return ringPosition(lanes, waiterId)
  // A batch waiter: after every interactive waiter, then by its own ring.
  const inBatch = ringPosition(batchLanes, waiterId)
  return inBatch === undefined ? undefined : context.ring.waiting + inBatch
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
