/**
 * The batch lifecycle machine, explored exhaustively: every state reachable from a batch of three
 * requests (both kinds) under every event, with the lifecycle rules checked on every transition.
 */
import { assert, describe, it } from "@effect/vitest"
import {
  type BatchEvent,
  type BatchKind,
  type BatchState,
  messagesStatus,
  openaiStatus,
  startBatch,
  stepBatch
} from "../../machines/batch.ts"

const TOTAL = 3

const events: ReadonlyArray<BatchEvent> = [
  { type: "validated", total: TOTAL },
  { type: "validation_failed" },
  { type: "request_ended", result: "succeeded" },
  { type: "request_ended", result: "errored" },
  { type: "request_ended", result: "canceled" },
  { type: "cancel", stopped: 0 },
  { type: "cancel", stopped: 1 },
  { type: "cancel", stopped: 5 },
  { type: "expire", stopped: 0 },
  { type: "expire", stopped: 2 },
  { type: "finalized" }
]

interface Edge {
  readonly prev: BatchState
  readonly event: BatchEvent
  readonly next: BatchState
  readonly changed: boolean
}

const explore = (kind: BatchKind) => {
  const start = startBatch(kind, TOTAL)
  const seen = new Map<string, BatchState>([[JSON.stringify(start), start]])
  const edges: Array<Edge> = []
  const queue = [start]
  while (queue.length > 0) {
    const prev = queue.shift()!
    for (const event of events) {
      const { state: next, changed } = stepBatch(prev, event)
      edges.push({ prev, event, next, changed })
      const key = JSON.stringify(next)
      if (!seen.has(key)) {
        seen.set(key, next)
        queue.push(next)
      }
    }
  }
  return { states: [...seen.values()], edges }
}

const sum = (s: BatchState) => s.counts.processing + s.counts.succeeded + s.counts.errored + s.counts.canceled + s.counts.expired

for (const kind of ["messages", "openai"] as const) {
  describe(`batch machine (${kind})`, () => {
    const graph = explore(kind)

    it("reaches every outcome", () => {
      const outcomes = new Set(graph.states.map((s) => s.outcome))
      const expected = kind === "openai" ? ["completed", "failed", "cancelled", "expired"] : ["completed", "cancelled", "expired"]
      for (const outcome of expected) assert.isTrue(outcomes.has(outcome as never), outcome)
      if (kind === "messages") assert.isFalse(outcomes.has("failed"))
    })

    it("every request is counted exactly once in every state", () => {
      for (const s of graph.states) {
        if (s.phase !== "validating" && s.outcome !== "failed") assert.strictEqual(sum(s), s.total, JSON.stringify(s))
        for (const n of Object.values(s.counts)) assert.isAtLeast(n, 0)
      }
    })

    it("an ended batch never changes, and a batch ends only when nothing is processing", () => {
      for (const e of graph.edges) {
        if (e.prev.phase === "ended") assert.isFalse(e.changed, JSON.stringify(e))
        if (e.next.phase === "ended" || e.next.phase === "finalizing") {
          if (e.next.outcome !== "failed") assert.strictEqual(e.next.counts.processing, 0)
        }
        if (!e.changed) assert.deepStrictEqual(e.next, e.prev)
      }
    })

    it("results only grow: a request's result is never taken back", () => {
      for (const e of graph.edges) {
        for (const k of ["succeeded", "errored", "canceled", "expired"] as const) assert.isAtLeast(e.next.counts[k], e.prev.counts[k])
      }
    })

    it("the outcome follows the rules: expiry wins, then cancel, else completed", () => {
      for (const s of graph.states) {
        if (s.outcome === null || s.outcome === "failed") continue
        const expected = s.expiryReached ? "expired" : s.cancelRequested ? "cancelled" : "completed"
        assert.strictEqual(s.outcome, expected)
        if (s.outcome === "completed") assert.strictEqual(s.counts.expired, 0)
      }
    })

    it("a cancel stops at most what is processing, and only once", () => {
      for (const e of graph.edges) {
        if (e.event.type !== "cancel" || !e.changed) continue
        assert.isFalse(e.prev.cancelRequested)
        assert.strictEqual(e.next.counts.canceled - e.prev.counts.canceled, Math.min(e.event.stopped, e.prev.counts.processing))
      }
    })

    it("the wire statuses follow the phase", () => {
      for (const s of graph.states) {
        const m = messagesStatus(s)
        const o = openaiStatus(s)
        if (s.phase === "ended") {
          assert.strictEqual(m, "ended")
          assert.strictEqual(o, s.outcome)
        } else if (s.cancelRequested && s.phase !== "finalizing") {
          assert.strictEqual(m, "canceling")
          assert.strictEqual(o, "cancelling")
        }
        if (kind === "messages") assert.notStrictEqual(s.phase, "finalizing")
        if (kind === "messages") assert.notStrictEqual(s.phase, "validating")
      }
    })
  })
}
