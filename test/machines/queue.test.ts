/**
 * Model-based tests of the capacity-queue machine: `xstate/graph` enumerates every reachable state
 * under bounded events (4 waiters, 3 keys, capacity 1–2, circuit threshold 2) and every invariant
 * is checked on every state and every transition. Replaying paths against the hosted actors is in
 * test/runtime/capacity-queues-model.test.ts.
 */
import { assert, describe, it } from "@effect/vitest"
import { TestModel } from "xstate/graph"
import { positionOf, queueContents, queueLogic, type QueueEvent, type QueueState, queueView, startQueue, stepQueue } from "../../machines/queue.ts"
import { explore } from "./graph.ts"
import { keyOf, queueEvents, serializeQueue, waitingIds } from "./queue-model.ts"

const bounds = { waiters: 4, keys: ["a", "b", "c"], capacities: [1, 2] }
const input = { capacity: 1, failureThreshold: 2 }
const graph = explore<QueueState, QueueEvent>(queueLogic, { events: queueEvents(bounds), serialize: serializeQueue, input })
const { states, edges } = graph
const grantsOf = (prev: QueueState, next: QueueState) => queueContents(next.context).holders.filter((id) => !queueContents(prev.context).holders.includes(id))
const emittedGrants = (prev: QueueState, event: QueueEvent) => stepQueue(prev, event).granted
const describeEdge = (prev: QueueState, event: QueueEvent) => `${serializeQueue(prev)} --${JSON.stringify(event)}-->`

describe("queue machine: every reachable state", () => {
  it("the state space is explored and non-trivial", () => {
    assert.isAbove(states.length, 1_000)
    assert.includeMembers([...new Set(states.map((s) => s.value as string))], ["closed", "open", "halfOpen"])
    // a TestModel sees the same graph: one shortest path per state
    const paths = new TestModel(queueLogic, {
      events: (snapshot) => queueEvents(bounds)(snapshot.context),
      serializeState: (snapshot) => serializeQueue(snapshot.context),
      serializeTransition: () => "",
      input
    }).getShortestPaths({ allowDuplicatePaths: true })
    assert.strictEqual(paths.length, states.length)
  })

  it("slots: never above capacity through a grant, never idle while someone waits", () => {
    for (const { prev, event, next } of edges) {
      if (grantsOf(prev, next).length > 0) assert.isAtMost(queueContents(next.context).holders.length, next.context.capacity, describeEdge(prev, event))
    }
    for (const state of states) {
      const { context } = state
      assert.isAtMost(queueContents(context).holders.length, Math.max(...bounds.capacities))
      assert.strictEqual(new Set([...queueContents(context).holders, ...waitingIds(state)]).size, queueContents(context).holders.length + waitingIds(state).length)
      const waiting = waitingIds(state).length > 0
      if (state.value === "closed" && waiting) assert.isAtLeast(queueContents(context).holders.length, context.capacity, serializeQueue(state))
      if (state.value === "halfOpen" && waiting) assert.isTrue(context.probe !== null || queueContents(context).holders.length >= context.capacity)
    }
  })

  it("every grant is emitted, in grant order, and goes to the head of its key's lane (FIFO)", () => {
    for (const { prev, event, next } of edges) {
      const granted = grantsOf(prev, next)
      assert.deepStrictEqual(emittedGrants(prev, event), granted, describeEdge(prev, event))
      let lanes = queueContents(prev.context).lanes.map((lane) => [...lane.waiterIds])
      if (event.type === "ENQUEUE") lanes = [...lanes, [event.waiterId]] // a fresh arrival may be granted at once
      for (const waiterId of granted) {
        const lane = lanes.find((ids) => ids.includes(waiterId))!
        assert.strictEqual(lane[0], waiterId, `FIFO: ${describeEdge(prev, event)}`)
        lane.shift()
      }
    }
  })

  it("circuit: open grants nothing, half-open grants exactly one probe, only the probe closes it", () => {
    for (const { prev, event, next } of edges) {
      const granted = grantsOf(prev, next)
      const at = describeEdge(prev, event)
      if (next.value === "open") assert.deepStrictEqual(granted, [], at)
      if (prev.value === "open") assert.include(["open", "halfOpen"], next.value, at)
      if (next.value === "halfOpen") {
        assert.isAtMost(granted.length, 1, at)
        if (granted.length === 1) assert.strictEqual(next.context.probe, granted[0], at)
        // a second probe only replaces one that left without a verdict
        if (prev.value === "halfOpen" && prev.context.probe !== null && granted.length > 0) {
          assert.deepStrictEqual(event, { type: "CANCEL", waiterId: prev.context.probe }, at)
        }
      }
      if (prev.value === "halfOpen" && next.value === "closed") {
        assert.deepStrictEqual(event, { type: "RELEASE", waiterId: prev.context.probe!, outcome: "success" }, at)
      }
      if (prev.value === "closed" && next.value === "open") {
        assert.strictEqual(event.type === "RELEASE" && event.outcome, "failure", at)
        assert.strictEqual(prev.context.consecutiveFailures + 1, prev.context.failureThreshold, at)
      }
    }
  })

  it("no key starves: while a key waits, no other key is served twice before it", () => {
    // Walk the product of the graph and, per waiting key, the set of keys served since it was.
    type Served = Record<string, ReadonlyArray<string>>
    const seen = new Set<string>()
    const stack: Array<{ state: QueueState; served: Served }> = [{ state: states[0], served: {} }]
    while (stack.length > 0) {
      const { state, served } = stack.pop()!
      const id = serializeQueue(state) + JSON.stringify(served)
      if (seen.has(id)) continue
      seen.add(id)
      for (const { event, next } of graph.out(state)) {
        const grantedKeys = grantsOf(state, next).map((w) => keyOf(state, w) ?? (event.type === "ENQUEUE" ? event.keyId : "?"))
        const nextServed: Served = {}
        for (const key of new Set(queueContents(next.context).lanes.map((lane) => lane.keyId))) {
          let sofar = queueContents(state.context).lanes.some((lane) => lane.keyId === key) ? [...(served[key] ?? [])] : []
          for (const granted of grantedKeys) {
            if (granted === key) sofar = []
            else {
              assert.notInclude(sofar, granted, `key ${key} starved by ${granted}: ${describeEdge(state, event)}`)
              sofar = [...sofar, granted].sort()
            }
          }
          nextServed[key] = sofar
        }
        stack.push({ state: next, served: nextServed })
      }
    }
    assert.isAbove(seen.size, states.length)
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
      for (const waiterId of waitingIds(state)) assert.strictEqual(positionOf(state.context, waiterId), order.indexOf(waiterId))
    }
  })
})

/** Drives the pure queue like its host does, collecting the grants. */
const drive = (input: { capacity: number; failureThreshold?: number }) => {
  let state = startQueue(input)
  const grants: Array<string> = []
  return {
    grants,
    send: (event: QueueEvent) => {
      const step = stepQueue(state, event)
      state = step.state
      grants.push(...step.granted)
    },
    get state() {
      return state
    }
  }
}

describe("queue machine: scenarios", () => {
  it("a flooding key cannot starve a light one", () => {
    const actor = drive({ capacity: 1 })
    const { grants } = actor
    for (let i = 1; i <= 20; i++) actor.send({ type: "ENQUEUE", waiterId: `a${i}`, keyId: "flood" })
    actor.send({ type: "ENQUEUE", waiterId: "b1", keyId: "light" })
    for (let i = 0; i < 3; i++) actor.send({ type: "RELEASE", waiterId: grants[grants.length - 1], outcome: "success" })
    assert.deepStrictEqual(grants, ["a1", "a2", "b1", "a3"])
    assert.deepStrictEqual(queueView(actor.state).waitingByKey, { flood: 17 })
  })

  it("a cancelled probe is replaced; a failed probe re-opens; a successful one fills every slot", () => {
    const actor = drive({ capacity: 2, failureThreshold: 1 })
    for (const id of ["x", "y", "z", "u"]) actor.send({ type: "ENQUEUE", waiterId: id, keyId: "k" })
    actor.send({ type: "RELEASE", waiterId: "x", outcome: "failure" })
    assert.strictEqual(queueView(actor.state).circuit, "open")
    actor.send({ type: "RELEASE", waiterId: "y", outcome: "success" }) // granted before opening: not counted
    assert.strictEqual(queueView(actor.state).circuit, "open")
    actor.send({ type: "CIRCUIT_PROBE_DUE" })
    assert.strictEqual(actor.state.context.probe, "z")
    actor.send({ type: "CANCEL", waiterId: "z" })
    assert.strictEqual(actor.state.context.probe, "u")
    actor.send({ type: "RELEASE", waiterId: "u", outcome: "failure" })
    assert.strictEqual(queueView(actor.state).circuit, "open")
    for (const id of ["p", "q", "r"]) actor.send({ type: "ENQUEUE", waiterId: id, keyId: "k" })
    actor.send({ type: "CIRCUIT_PROBE_DUE" })
    actor.send({ type: "RELEASE", waiterId: "p", outcome: "success" })
    assert.deepStrictEqual(queueContents(actor.state.context).holders, ["q", "r"])
    assert.strictEqual(queueView(actor.state).circuit, "closed")
  })
})
