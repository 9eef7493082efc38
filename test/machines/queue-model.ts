/**
 * The bounded event sets that the model-based tests walk the queue machine with. Waiters are
 * numbered in arrival order (`w1`, `w2`, …) and each arrives once, so the state space is finite.
 */
import { queueContents, type QueueEvent, type QueuePriority, type QueueState } from "../../machines/queue.ts"

export interface QueueModelBounds {
  readonly waiters: number
  readonly keys: ReadonlyArray<string>
  readonly capacities: ReadonlyArray<number>
  /** Each arrival once per priority (absent: interactive only, without a `priority` field). */
  readonly priorities?: ReadonlyArray<QueuePriority>
}

export const queueEvents = (bounds: QueueModelBounds) => (snapshot: QueueState): Array<QueueEvent> => {
  const { context } = snapshot
  const events: Array<QueueEvent> = []
  if (context.stats.enqueued < bounds.waiters) {
    const waiterId = `w${context.stats.enqueued + 1}`
    for (const keyId of bounds.keys) {
      if (bounds.priorities === undefined) events.push({ type: "ENQUEUE", waiterId, keyId })
      else for (const priority of bounds.priorities) events.push({ type: "ENQUEUE", waiterId, keyId, priority })
    }
  }
  for (const lane of [...queueContents(context).lanes, ...queueContents(context).batchLanes]) for (const waiterId of lane.waiterIds) events.push({ type: "CANCEL", waiterId })
  for (const waiterId of queueContents(context).holders) {
    events.push(
      { type: "RELEASE", waiterId, outcome: "success" },
      { type: "RELEASE", waiterId, outcome: "failure" },
      { type: "CANCEL", waiterId }
    )
  }
  for (const capacity of bounds.capacities) if (capacity !== context.capacity) events.push({ type: "CAPACITY", capacity })
  events.push({ type: "CIRCUIT_PROBE_DUE" })
  return events
}

/**
 * States are compared by value and context only (not by the event that reached them). The context
 * is written with its waiters and holders as plain arrays (`queueContents`): its persistent
 * structures (hash tries, shared FIFO buffers) differ between equal states.
 */
export const serializeQueue = (state: QueueState) => {
  const { waiting: _waiting, ring: _ring, batchRing: _batchRing, holding: _holding, ...scalars } = state.context
  return JSON.stringify({ value: state.value, context: { ...scalars, ...queueContents(state.context) } })
}

export const waitingIds = (snapshot: QueueState) => [...queueContents(snapshot.context).lanes, ...queueContents(snapshot.context).batchLanes].flatMap((lane) => lane.waiterIds)
export const keyOf = (snapshot: QueueState, waiterId: string) =>
  [...queueContents(snapshot.context).lanes, ...queueContents(snapshot.context).batchLanes].find((lane) => lane.waiterIds.includes(waiterId))?.keyId
