/**
 * The queue machine's priority classes, model-tested like the rest of it: `xstate/graph` walks
 * every reachable state with interactive and batch arrivals (4 waiters, 2 keys, each capacity from
 * 1 to 3, circuit threshold 2), and on every state and transition:
 * - an interactive waiter is granted the next free slot ahead of every batch waiter;
 * - batch requests never hold more than capacity − 1 slots (capacity ≥ 2), so while interactive
 *   requests wait batch work holds at most capacity − 1 of them;
 * - no slot idles while a grant is allowed; grants stay FIFO per key within each class;
 * - positionOf still predicts the grant order.
 */
import { assert, describe, it } from "@effect/vitest"
import { batchCap, positionOf, queueContents, queueLogic, type QueueEvent, type QueueState, stepQueue } from "../../machines/queue.ts"
import { explore } from "./graph.ts"
import { queueEvents, serializeQueue, waitingIds } from "./queue-model.ts"

const grantsOf = (prev: QueueState, next: QueueState) => queueContents(next.context).holders.filter((id) => !queueContents(prev.context).holders.includes(id))
const describeEdge = (prev: QueueState, event: QueueEvent) => `${serializeQueue(prev)} --${JSON.stringify(event)}-->`
const interactiveWaiting = (s: QueueState) => queueContents(s.context).lanes.reduce((n, lane) => n + lane.waiterIds.length, 0)
const batchWaiting = (s: QueueState) => queueContents(s.context).batchLanes.reduce((n, lane) => n + lane.waiterIds.length, 0)

for (const capacity of [1, 2, 3]) {
  describe(`queue machine with priorities, capacity ${capacity}`, () => {
    const bounds = { waiters: 4, keys: ["a", "b"], capacities: [capacity], priorities: ["interactive", "batch"] as const }
    const graph = explore<QueueState, QueueEvent>(queueLogic, {
      events: queueEvents(bounds),
      serialize: serializeQueue,
      input: { capacity, failureThreshold: 2 }
    })
    const { states, edges } = graph

    it("explores states with both classes waiting and holding", () => {
      assert.isAbove(states.length, 100)
      assert.isTrue(states.some((s) => interactiveWaiting(s) > 0 && queueContents(s.context).batchHolders.length > 0))
      assert.isTrue(states.some((s) => batchWaiting(s) > 0 && interactiveWaiting(s) > 0))
    })

    it("an interactive waiter is granted ahead of every batch waiter", () => {
      for (const { prev, event, next } of edges) {
        const granted = grantsOf(prev, next)
        const batchGranted = granted.filter((w) => queueContents(next.context).batchHolders.includes(w))
        if (batchGranted.length === 0) continue
        const at = describeEdge(prev, event)
        // no interactive request is left waiting by a step that served a batch one
        assert.strictEqual(interactiveWaiting(next), 0, at)
        // and within the step, interactive grants come first
        const firstBatch = granted.indexOf(batchGranted[0])
        assert.isTrue(granted.slice(firstBatch).every((w) => queueContents(next.context).batchHolders.includes(w)), at)
      }
    })

    it("batch work holds at most capacity − 1 slots (capacity ≥ 2), so never more while interactive requests wait", () => {
      for (const s of states) {
        assert.isAtMost(queueContents(s.context).batchHolders.length, batchCap(s.context.capacity), serializeQueue(s))
        if (capacity >= 2 && interactiveWaiting(s) > 0) assert.isAtMost(queueContents(s.context).batchHolders.length, capacity - 1, serializeQueue(s))
        assert.includeMembers([...queueContents(s.context).holders], [...queueContents(s.context).batchHolders])
      }
    })

    it("no slot idles while a grant is allowed", () => {
      for (const s of states) {
        if (s.value !== "closed") continue
        const { holders, batchHolders } = queueContents(s.context)
        if (interactiveWaiting(s) > 0) assert.strictEqual(holders.length, capacity, serializeQueue(s))
        else if (batchWaiting(s) > 0) assert.isTrue(holders.length === capacity || batchHolders.length === batchCap(capacity), serializeQueue(s))
      }
    })

    it("grants are FIFO per key within each class, and emitted in grant order", () => {
      for (const { prev, event, next } of edges) {
        const granted = grantsOf(prev, next)
        assert.deepStrictEqual(stepQueue(prev, event).granted, granted, describeEdge(prev, event))
        const lanes = [...queueContents(prev.context).lanes, ...queueContents(prev.context).batchLanes].map((lane) => ({ key: lane.keyId, batch: queueContents(prev.context).batchLanes.includes(lane), ids: [...lane.waiterIds] }))
        if (event.type === "ENQUEUE") lanes.push({ key: event.keyId, batch: event.priority === "batch", ids: [event.waiterId] })
        for (const waiterId of granted) {
          const lane = lanes.find((l) => l.ids[0] === waiterId)
          assert.isDefined(lane, `FIFO: ${describeEdge(prev, event)}`)
          lane!.ids.shift()
        }
      }
    })

    it("positionOf predicts the grant order when nobody else arrives", () => {
      for (const state of states.filter((s) => s.value === "closed")) {
        const order: Array<string> = []
        let current = state
        while (queueContents(current.context).holders.length > 0) {
          const { state: next } = stepQueue(current, { type: "RELEASE", waiterId: queueContents(current.context).holders[0], outcome: "success" })
          order.push(...grantsOf(current, next))
          current = next
        }
        for (const waiterId of waitingIds(state)) assert.strictEqual(positionOf(state.context, waiterId), order.indexOf(waiterId), serializeQueue(state))
      }
    })
  })
}
