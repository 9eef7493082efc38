/**
 * Model-based tests of the dispatch machine: every reachable state under two candidates and
 * three kinds of failure, with the retry and continuity rules checked on every transition.
 * test/runtime/dispatcher-model.test.ts replays generated paths against the real Dispatcher.
 */
import { assert, describe, it } from "@effect/vitest"
import {
  dispatchLogic,
  dispatchOutput,
  type DispatchEvent,
  type DispatchState,
  eligibleCandidates,
  MAX_ATTEMPTS,
  MAX_HONORED_RETRY_AFTER_SECONDS,
  startDispatch,
  stepDispatch
} from "../../machines/dispatch.ts"
import { candidates, dispatchEvents, errors, serializeDispatch } from "./dispatch-model.ts"
import { explore } from "./graph.ts"

const { states, edges } = explore<DispatchState, DispatchEvent>(dispatchLogic, {
  events: dispatchEvents,
  serialize: serializeDispatch,
  input: { candidates }
})
const at = (prev: DispatchState, event: DispatchEvent) => `${serializeDispatch(prev)} --${JSON.stringify(event)}-->`
const failedWith = (event: DispatchEvent) => (event.type === "FAILED" || event.type === "CONTINUE_TEXT" ? event.error : undefined)

describe("dispatch machine: every reachable state", () => {
  it("reaches every state, including five-attempt exhaustion and continuation", () => {
    const values = new Set<string>(states.map((s) => s.value))
    for (const value of ["waiting", "calling", "retryWait", "streaming", "done", "failed"]) assert.isTrue(values.has(value), value)
    assert.isTrue(states.some((s) => s.context.attempts === MAX_ATTEMPTS && s.value === "failed"))
    assert.isTrue(states.some((s) => s.context.continuations > 0 && s.value === "done"))
  })

  it("at most five attempts; an attempt starts only on an eligible grant", () => {
    for (const { prev, event, next } of edges) {
      assert.isAtMost(next.context.attempts, MAX_ATTEMPTS)
      const started = next.context.attempts - prev.context.attempts
      assert.strictEqual(started, next.value === "calling" && prev.value === "waiting" ? 1 : 0, at(prev, event))
      if (started === 1) {
        assert.strictEqual(event.type, "GRANTED")
        assert.include(eligibleCandidates(prev).map((c) => c.placementId), next.context.current, at(prev, event))
      }
    }
  })

  it("before the first byte: non-retryable fails at once, retryable fails over, then backs off", () => {
    for (const { prev, event, next } of edges.filter((e) => e.prev.value === "calling" && e.event.type === "FAILED")) {
      const error = failedWith(event)!
      const others = eligibleCandidates(prev).filter((c) => c.placementId !== prev.context.current)
      if (!error.retryable || prev.context.attempts >= MAX_ATTEMPTS) assert.strictEqual(next.value, "failed", at(prev, event))
      else if (others.length > 0) {
        assert.strictEqual(next.value, "waiting", at(prev, event)) // failover without delay
        assert.notInclude(eligibleCandidates(next).map((c) => c.placementId), prev.context.current)
      } else if ((error.retryAfterSeconds ?? 0) > MAX_HONORED_RETRY_AFTER_SECONDS) assert.strictEqual(next.value, "failed", at(prev, event))
      else assert.strictEqual(next.value, "retryWait", at(prev, event))
    }
    // What ends at once: a retry-after the gateway does not wait out, met on the last candidate.
    assert.isTrue(edges.some((e) => e.prev.value === "calling" && failedWith(e.event) === errors.rateLimitedForAnHour && e.next.value === "failed"))
    for (const { prev, event, next } of edges.filter((e) => e.next.value === "retryWait" && e.prev.value !== "retryWait")) {
      assert.isAtMost(next.context.lastError?.retryAfterSeconds ?? 0, MAX_HONORED_RETRY_AFTER_SECONDS, at(prev, event))
    }
    for (const { event, next } of edges.filter((e) => e.prev.value === "retryWait" && e.next.value === "waiting")) {
      assert.strictEqual(event.type, "RETRY_DUE")
      assert.strictEqual(eligibleCandidates(next).length, candidates.length, "a new round tries every candidate")
    }
  })

  it("after the first byte: only a text continuation may move on, never to the broken placement", () => {
    for (const { prev, event, next } of edges.filter((e) => e.prev.value === "streaming")) {
      if (event.type === "FAILED") assert.strictEqual(next.value, "failed", at(prev, event))
      if (next.value === "waiting") {
        assert.isTrue(event.type === "CONTINUE_TEXT" && event.error.retryable, at(prev, event))
        const eligible = eligibleCandidates(next).map((c) => c.placementId)
        assert.notInclude(eligible, prev.context.current, at(prev, event))
        assert.isAbove(eligible.length, 0)
      }
      if (event.type === "CONTINUE_TEXT" && next.value === "failed") {
        assert.isTrue(
          !event.error.retryable || prev.context.attempts >= MAX_ATTEMPTS ||
            eligibleCandidates(prev).every((c) => c.placementId === prev.context.current),
          at(prev, event)
        )
      }
    }
    for (const { prev, next } of edges) if (prev.context.firstByteSent) assert.isTrue(next.context.firstByteSent)
  })

  it("no dead ends: waiting always has a candidate, done names who served", () => {
    for (const state of states) {
      if (state.value === "waiting") assert.isAbove(eligibleCandidates(state).length, 0, serializeDispatch(state))
      if (state.value === "done") assert.isNotNull(dispatchOutput(state)?.servedBy)
      if (state.value === "failed") assert.isNotNull(dispatchOutput(state)?.failure)
    }
  })
})

describe("dispatch machine: circuits and resumes", () => {
  it("every sick eligible placement ends a request that already failed; one that has not failed waits", () => {
    for (const { prev, event, next } of edges.filter((e) => e.event.type === "CIRCUITS" && e.prev.value === "waiting")) {
      const shouldFail = prev.context.lastError !== null
      assert.strictEqual(next.value, shouldFail ? "failed" : "waiting", at(prev, event))
    }
  })

  it("a text break continues only on a candidate that can resume", () => {
    const resumeless = [{ placementId: "p1", modelId: "svc-one", canResume: true }, { placementId: "p2", modelId: "svc-two", canResume: false }]
    const broken = [{ type: "GRANTED", placementId: "p1" }, { type: "FIRST_BYTE" }, { type: "CONTINUE_TEXT", error: errors.serverError }] as const
    assert.strictEqual(run(broken, { candidates: resumeless }).value, "failed")
    const state = run(broken, { candidates })
    assert.strictEqual(state.value, "waiting")
    assert.deepStrictEqual(eligibleCandidates(state).map((c) => c.placementId), ["p2"])
  })
})

const run = (events: ReadonlyArray<DispatchEvent>, input: Parameters<typeof startDispatch>[0] = { candidates }) =>
  events.reduce(stepDispatch, startDispatch(input))

describe("dispatch machine: scenarios", () => {

  it("a 429 on the only candidate backs off and retries it", () => {
    const snapshot = run([{ type: "GRANTED", placementId: "p1" }, { type: "FAILED", error: errors.rateLimited }], { candidates: [candidates[0]] })
    assert.strictEqual(snapshot.value, "retryWait")
    assert.deepStrictEqual(snapshot.context.lastError, errors.rateLimited)
  })

  it("five retryable failures exhaust the attempts", () => {
    const attempt = (placementId: string): Array<DispatchEvent> => [{ type: "GRANTED", placementId }, { type: "FAILED", error: errors.serverError }]
    const snapshot = run([...attempt("p1"), ...attempt("p2"), { type: "RETRY_DUE" }, ...attempt("p1"), ...attempt("p2"), { type: "RETRY_DUE" }, ...attempt("p1")])
    assert.strictEqual(snapshot.value, "failed")
    assert.deepStrictEqual(dispatchOutput(snapshot), { servedBy: "p1", attempts: 5, failure: "error", error: errors.serverError })
  })

  it("no candidates fails at once", () => {
    assert.strictEqual(dispatchOutput(run([], { candidates: [] }))?.failure, "no_candidates")
  })
})
