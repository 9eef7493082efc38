/**
 * Model-based tests of the run machine: every reachable state under a bounded set of log events
 * (two steps, two tool calls, every outcome), with the lifecycle rules checked on every
 * transition; then every simple path to a final state is replayed three ways — by a live actor,
 * by the pure fold the repository uses (`stepRun`), and by a fold that persists and restores the
 * state after every event (what a crash and resume does) — and the three must agree.
 */
import { assert, describe, it } from "@effect/vitest"
import { createActor } from "xstate"
import { createTestModel } from "xstate/graph"
import {
  persistRun,
  restoreRun,
  runMachine,
  type RunEvent,
  type RunSnapshot,
  startRun,
  statusOf,
  stepRun,
  TERMINAL_STATUSES,
  toRunEvent
} from "../../machines/run.ts"
import { explore } from "./graph.ts"
import { input, runEvents, serialize } from "./run-model.ts"

const at = (prev: RunSnapshot, event: RunEvent) => `${serialize(prev)} --${JSON.stringify(event)}-->`

const graph = explore<RunSnapshot, RunEvent>(runMachine, { events: runEvents, serialize, input })
const isFinal = (s: RunSnapshot) => s.status === "done"

describe("run machine: every reachable state", () => {
  it("reaches every state, including a tool wait, both decisions and every outcome", () => {
    const values = new Set(graph.states.map((s) => s.value as string))
    for (const v of ["ready", "inNode", "requiresAction", "finishing", ...TERMINAL_STATUSES]) assert.isTrue(values.has(v), v)
    const reasons = new Set(graph.states.map((s) => s.context.decided?.reason))
    for (const reason of [null, "max_output_tokens", "max_turns"]) assert.isTrue(reasons.has(reason), String(reason))
  })

  it("an outcome ends the run from every live state, with the status it names, and nothing follows it", () => {
    for (const { prev, event, next } of graph.edges) {
      if (isFinal(prev)) assert.strictEqual(serialize(next), serialize(prev), at(prev, event))
      else if (event.type === "outcome") {
        assert.strictEqual(next.value, event.status, at(prev, event))
        assert.deepStrictEqual(next.context.outcome, { status: event.status, reason: "r" })
      } else assert.isFalse(isFinal(next), at(prev, event))
    }
  })

  it("status and context agree in every state", () => {
    for (const s of graph.states) {
      const status = statusOf(s)
      assert.strictEqual(status === "requires_action", s.value === "requiresAction", serialize(s))
      if (s.value === "requiresAction") assert.isAbove(s.context.pending.length, 0)
      assert.strictEqual(s.context.openNode !== null, s.value === "inNode", serialize(s))
      if (s.value === "finishing") assert.isNotNull(s.context.decided)
      assert.strictEqual(isFinal(s), s.context.outcome !== null)
      assert.isAtMost(s.context.nodes, input.maxTurns)
    }
  })

  it("a step starts only when ready, and only its own completion closes it", () => {
    for (const { prev, event, next } of graph.edges) {
      if (next.context.nodes > prev.context.nodes) {
        assert.strictEqual(prev.value, "ready", at(prev, event))
        assert.strictEqual(event.type, "node.started")
      }
      if (prev.value === "inNode" && event.type === "node.completed") {
        assert.strictEqual(next.value !== "inNode", event.nodeId === prev.context.openNode, at(prev, event))
      }
    }
  })

  it("a tool wait ends only when every call is answered, then another step runs unless the turns are spent", () => {
    for (const { prev, event, next } of graph.edges.filter((e) => e.prev.value === "requiresAction" && e.next.value !== "requiresAction")) {
      if (event.type === "outcome") continue
      assert.strictEqual(event.type, "tool.result", at(prev, event))
      assert.lengthOf(next.context.pending, 0)
      if (next.value === "finishing") {
        assert.strictEqual(prev.context.nodes, input.maxTurns)
        assert.deepStrictEqual(next.context.decided, { status: "incomplete", reason: "max_turns" })
      } else assert.strictEqual(next.value, "ready", at(prev, event))
    }
  })
})

describe("run machine: recovery replays agree", () => {
  const paths = createTestModel(runMachine, { events: runEvents, serializeState: serialize, input })
    .getSimplePaths({ toState: isFinal })

  it("every simple path to an outcome: live actor = fold = fold through persist/restore after every event", () => {
    assert.isAbove(paths.length, 50)
    for (const path of paths) {
      const events = path.steps.map((s) => s.event as RunEvent).filter((e) => e.type !== "xstate.init" as string)
      const actor = createActor(runMachine, { input }).start()
      let folded = startRun(input)
      let resumed = startRun(input)
      for (const event of events) {
        actor.send(event)
        folded = stepRun(folded, event)
        resumed = stepRun(restoreRun(JSON.parse(JSON.stringify(persistRun(resumed)))), event)
      }
      const description = events.map((e) => e.type).join(" → ")
      assert.strictEqual(serialize(folded), serialize(actor.getSnapshot()), description)
      assert.strictEqual(serialize(resumed), serialize(folded), description)
      assert.strictEqual(statusOf(folded), path.state.value as string, description)
      actor.stop()
    }
  })
})

describe("run machine: log events as read from JSON", () => {
  it("reads the fields it needs and ignores caller events", () => {
    assert.isUndefined(toRunEvent({ type: "note", text: "hi" }))
    assert.deepStrictEqual(toRunEvent({ type: "outcome" }), { type: "outcome", status: "completed", reason: null })
    assert.deepStrictEqual(toRunEvent({ type: "outcome", status: "bogus", reason: 3 }), { type: "outcome", status: "completed", reason: null })
    assert.deepStrictEqual(toRunEvent({ type: "tool.result", toolUseId: "t" }), { type: "tool.result", toolUseId: "t" })
    assert.isUndefined(toRunEvent({ type: "tool.result" }))
  })

  it("a bookkeeping run stays running until its outcome", () => {
    let s = startRun({ executable: false })
    assert.strictEqual(s.value, "open")
    s = stepRun(s, { type: "node.started", nodeId: "n1" })
    assert.strictEqual(statusOf(s), "running")
    s = stepRun(s, { type: "outcome", status: "failed", reason: "gave up" })
    assert.strictEqual(statusOf(s), "failed")
  })
})
