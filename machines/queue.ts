/**
 * The capacity queue of ONE placement, as a pure XState machine: no I/O, no timers, no randomness.
 * The host (src/runtime/capacity-queues.ts) sends every event, including the circuit's cooldown
 * (`CIRCUIT_PROBE_DUE`), so `xstate/graph` can walk every path and the same paths can drive the
 * real hosted actor.
 *
 * Slots: `capacity` requests hold a slot at once. A free slot goes to the next waiter at once and
 * the grant is announced with `emit({ type: "granted", waiterId })` (host: `actor.on("granted")`).
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
import { enqueueActions, setup, type SnapshotFrom } from "xstate"

export type ReleaseOutcome = "success" | "failure"
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
  /** The half-open probe in flight, if any. */
  readonly probe: string | null
  readonly consecutiveFailures: number
  readonly stats: QueueStats
}

export type QueueEvent =
  | { readonly type: "ENQUEUE"; readonly waiterId: string; readonly keyId: string }
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

const isWaiting = (context: QueueContext, waiterId: string) => context.lanes.some((lane) => lane.waiterIds.includes(waiterId))
const isHolder = (context: QueueContext, waiterId: string) => context.holders.includes(waiterId)
const bump = (stats: QueueStats, key: keyof QueueStats): QueueStats => ({ ...stats, [key]: stats[key] + 1 })

const addWaiter = (context: QueueContext, waiterId: string, keyId: string): QueueContext => {
  const exists = context.lanes.some((lane) => lane.keyId === keyId)
  const lanes = exists
    ? context.lanes.map((lane) => lane.keyId === keyId ? { keyId, waiterIds: [...lane.waiterIds, waiterId] } : lane)
    : [...context.lanes, { keyId, waiterIds: [waiterId] }]
  return { ...context, lanes, stats: bump(context.stats, "enqueued") }
}

const removeWaiter = (context: QueueContext, waiterId: string): QueueContext => ({
  ...context,
  lanes: context.lanes
    .map((lane) => ({ keyId: lane.keyId, waiterIds: lane.waiterIds.filter((id) => id !== waiterId) }))
    .filter((lane) => lane.waiterIds.length > 0)
})

const removeHolder = (context: QueueContext, waiterId: string): QueueContext => ({
  ...context,
  holders: context.holders.filter((id) => id !== waiterId),
  probe: context.probe === waiterId ? null : context.probe
})

/** Grants up to `limit` free slots by the fairness policy; returns the new context and who got one. */
const fill = (context: QueueContext, limit: number): { context: QueueContext; granted: Array<string> } => {
  let next = context
  const granted: Array<string> = []
  while (granted.length < limit && next.holders.length < next.capacity && next.lanes.length > 0) {
    const [head, ...rest] = next.lanes
    const [waiterId, ...remaining] = head.waiterIds
    const lanes = remaining.length > 0 ? [...rest, { keyId: head.keyId, waiterIds: remaining }] : rest
    next = { ...next, lanes, holders: [...next.holders, waiterId], stats: bump(next.stats, "granted") }
    granted.push(waiterId)
  }
  return { context: next, granted }
}

type EventOf<T extends QueueEvent["type"]> = Extract<QueueEvent, { type: T }>

export const queueMachine = setup({
  types: {
    context: {} as QueueContext,
    events: {} as QueueEvent,
    input: {} as QueueInput,
    emitted: {} as QueueEmitted
  },
  guards: {
    isNewWaiter: ({ context, event }) => {
      const { waiterId, keyId } = event as EventOf<"ENQUEUE">
      return typeof waiterId === "string" && typeof keyId === "string" && !isWaiting(context, waiterId) && !isHolder(context, waiterId)
    },
    isCapacity: ({ event }) => Number.isInteger((event as EventOf<"CAPACITY">).capacity) && (event as EventOf<"CAPACITY">).capacity >= 0,
    isHolder: ({ context, event }) => isHolder(context, (event as EventOf<"RELEASE">).waiterId),
    tripsCircuit: ({ context, event }) => {
      const { waiterId, outcome } = event as EventOf<"RELEASE">
      return isHolder(context, waiterId) && outcome === "failure" &&
        context.consecutiveFailures + 1 >= context.failureThreshold
    },
    probeSucceeded: ({ context, event }) => {
      const { waiterId, outcome } = event as EventOf<"RELEASE">
      return context.probe === waiterId && outcome === "success"
    },
    probeFailed: ({ context, event }) => {
      const { waiterId, outcome } = event as EventOf<"RELEASE">
      return context.probe === waiterId && outcome === "failure"
    }
  },
  actions: {
    admit: enqueueActions(({ context, event, enqueue }) => {
      const { waiterId, keyId } = event as EventOf<"ENQUEUE">
      enqueue.assign(addWaiter(context, waiterId, keyId))
    }),
    cancel: enqueueActions(({ context, event, enqueue }) => {
      const { waiterId } = event as EventOf<"CANCEL">
      if (isWaiting(context, waiterId)) {
        enqueue.assign({ ...removeWaiter(context, waiterId), stats: bump(context.stats, "cancelled") })
      } else if (isHolder(context, waiterId)) enqueue.assign(removeHolder(context, waiterId))
    }),
    /** Frees the slot and, while closed, keeps the consecutive-failure count. */
    release: enqueueActions(({ context, event, enqueue }) => {
      const { waiterId, outcome } = event as EventOf<"RELEASE">
      if (!isHolder(context, waiterId)) return
      const next = removeHolder(context, waiterId)
      const success = outcome === "success"
      enqueue.assign({
        ...next,
        consecutiveFailures: success ? 0 : context.consecutiveFailures + 1,
        stats: bump(context.stats, success ? "succeeded" : "failed")
      })
    }),
    /** Frees the slot of a call granted before the circuit opened; its outcome is not counted. */
    releaseUncounted: enqueueActions(({ context, event, enqueue }) => {
      const { waiterId } = event as EventOf<"RELEASE">
      if (isHolder(context, waiterId)) enqueue.assign(removeHolder(context, waiterId))
    }),
    setCapacity: enqueueActions(({ context, event, enqueue }) => {
      enqueue.assign({ ...context, capacity: (event as EventOf<"CAPACITY">).capacity })
    }),
    grantAll: enqueueActions(({ context, enqueue }) => {
      const { context: next, granted } = fill(context, Number.POSITIVE_INFINITY)
      if (granted.length === 0) return
      enqueue.assign(next)
      for (const waiterId of granted) enqueue.emit({ type: "granted", waiterId })
    }),
    grantProbe: enqueueActions(({ context, enqueue }) => {
      if (context.probe !== null) return
      const { context: next, granted } = fill(context, 1)
      if (granted.length === 0) return
      enqueue.assign({ ...next, probe: granted[0] })
      enqueue.emit({ type: "granted", waiterId: granted[0] })
    }),
    resetFailures: enqueueActions(({ enqueue }) => enqueue.assign({ consecutiveFailures: 0 })),
    countOpening: enqueueActions(({ context, enqueue }) => enqueue.assign({ stats: bump(context.stats, "opened") }))
  }
}).createMachine({
  id: "capacityQueue",
  context: ({ input }) => ({
    capacity: input.capacity,
    failureThreshold: input.failureThreshold ?? DEFAULT_FAILURE_THRESHOLD,
    holders: [],
    lanes: [],
    probe: null,
    consecutiveFailures: 0,
    stats: { enqueued: 0, granted: 0, cancelled: 0, succeeded: 0, failed: 0, opened: 0 }
  }),
  initial: "closed",
  states: {
    closed: {
      entry: ["resetFailures", "grantAll"],
      on: {
        ENQUEUE: { guard: "isNewWaiter", actions: ["admit", "grantAll"] },
        CANCEL: { actions: ["cancel", "grantAll"] },
        CAPACITY: { guard: "isCapacity", actions: ["setCapacity", "grantAll"] },
        RELEASE: [
          { guard: "tripsCircuit", target: "open", actions: "release" },
          { guard: "isHolder", actions: ["release", "grantAll"] }
        ]
      }
    },
    open: {
      entry: "countOpening",
      on: {
        ENQUEUE: { guard: "isNewWaiter", actions: "admit" },
        CANCEL: { actions: "cancel" },
        CAPACITY: { guard: "isCapacity", actions: "setCapacity" },
        RELEASE: { guard: "isHolder", actions: "releaseUncounted" },
        CIRCUIT_PROBE_DUE: { target: "halfOpen" }
      }
    },
    halfOpen: {
      entry: "grantProbe",
      on: {
        ENQUEUE: { guard: "isNewWaiter", actions: ["admit", "grantProbe"] },
        CANCEL: { actions: ["cancel", "grantProbe"] },
        CAPACITY: { guard: "isCapacity", actions: ["setCapacity", "grantProbe"] },
        RELEASE: [
          { guard: "probeSucceeded", target: "closed", actions: "release" },
          { guard: "probeFailed", target: "open", actions: "release" },
          { guard: "isHolder", actions: ["releaseUncounted", "grantProbe"] }
        ]
      }
    }
  }
})

export type QueueSnapshot = SnapshotFrom<typeof queueMachine>

export interface QueueView {
  readonly capacity: number
  readonly inUse: number
  readonly waiting: number
  readonly waitingByKey: Readonly<Record<string, number>>
  readonly circuit: CircuitState
}

export const queueView = (snapshot: QueueSnapshot): QueueView => {
  const { context } = snapshot
  return {
    capacity: context.capacity,
    inUse: context.holders.length,
    waiting: context.lanes.reduce((sum, lane) => sum + lane.waiterIds.length, 0),
    waitingByKey: Object.fromEntries(context.lanes.map((lane) => [lane.keyId, lane.waiterIds.length])),
    circuit: snapshot.value as CircuitState
  }
}

/**
 * How many grants go to others before `waiterId`, if nobody else arrives or leaves (the ring
 * serves one waiter per lane per round). `undefined` when the waiter is not waiting.
 */
export const positionOf = (context: QueueContext, waiterId: string): number | undefined => {
  const laneIndex = context.lanes.findIndex((lane) => lane.waiterIds.includes(waiterId))
  if (laneIndex < 0) return undefined
  const round = context.lanes[laneIndex].waiterIds.indexOf(waiterId)
  return context.lanes.reduce(
    (ahead, lane, index) => ahead + Math.min(lane.waiterIds.length, round) + (index < laneIndex && lane.waiterIds.length > round ? 1 : 0),
    0
  )
}
