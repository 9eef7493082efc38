/**
 * Replays paths of the dispatch machine (from `xstate/graph`) against the real Dispatcher: each
 * path is turned into a script of what every call does (fail before the first byte, answer,
 * break in text, break in a tool call), and the Dispatcher must make the same calls, in the same
 * order, and end the same way, with every slot released.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Fiber, Layer, Result, Stream } from "effect"
import { TestClock } from "effect/testing"
import { TestModel } from "xstate/graph"
import { dispatchLogic, eligibleCandidates, type AttemptError, type DispatchEvent, type DispatchState } from "../../machines/dispatch.ts"
import type { BackendError } from "../../src/backends/backend.ts"
import { eventOrderViolation } from "../../src/model/event-order.ts"
import type { CanonicalEvent } from "../../src/model/events.ts"
import { CapacityQueues } from "../../src/runtime/capacity-queues.ts"
import { Dispatcher } from "../../src/runtime/dispatcher.ts"
import { candidates, dispatchEvents, serializeDispatch } from "../machines/dispatch-model.ts"
import { badRequest, inToolCall, type Play, rateLimited, scripted, serverError, textSoFar } from "./scripted.ts"

// The host grants the first eligible candidate when all are free, never times out here, never
// reports success before a first byte, and its circuits stay closed (tested on their own): only
// those paths can be replayed.
const replayable = (state: DispatchState, event: DispatchEvent) =>
  event.type === "GRANTED" ? event.placementId === eligibleCandidates(state)[0]?.placementId
    : event.type === "SUCCEEDED" ? state.value === "streaming"
    : event.type !== "QUEUE_TIMEOUT" && event.type !== "CIRCUITS"

const paths = new TestModel(dispatchLogic, {
  events: (snapshot) => dispatchEvents(snapshot.context),
  filterEvents: (snapshot, event) => replayable(snapshot.context, event),
  serializeState: (snapshot) => serializeDispatch(snapshot.context),
  serializeTransition: () => "",
  input: { candidates }
}).getShortestPaths({ toState: (snapshot) => snapshot.context.value === "done" || snapshot.context.value === "failed" })

const backendError = (error: AttemptError): BackendError =>
  error.status === 429 ? rateLimited(error.retryAfterSeconds ?? 1) : error.status === 400 ? badRequest : serverError

/** What each placement's runs and resumes must do for the dispatcher to walk `events`. */
const scriptOf = (events: ReadonlyArray<DispatchEvent>) => {
  const plays = new Map(candidates.map((c) => [c.placementId, { runs: [] as Array<Play>, resumes: [] as Array<Play> }]))
  const expectedCalls: Array<string> = []
  let continuing = false
  let sent = "" // text the client has seen; every text break below adds "Hello "
  let current: { placementId: string; continuing: boolean; firstByte: boolean } | undefined
  let servedModel: string | undefined // the model of the first call that sent a byte
  const settle = (play: Play) => {
    const entry = plays.get(current!.placementId)!
    ;(current!.continuing ? entry.resumes : entry.runs).push(play)
  }
  for (const event of events) {
    const model = candidates.find((c) => c.placementId === current?.placementId)?.modelId ?? ""
    switch (event.type) {
      case "GRANTED":
        current = { placementId: event.placementId, continuing, firstByte: false }
        expectedCalls.push(continuing ? `${event.placementId}+resume(${sent})` : event.placementId)
        break
      case "FIRST_BYTE":
        current!.firstByte = true
        servedModel ??= candidates.find((c) => c.placementId === current!.placementId)!.modelId
        break
      case "SUCCEEDED":
        settle({ kind: "answer", text: "world" })
        break
      case "FAILED":
        settle(current!.firstByte ? { kind: "break", events: inToolCall(model), error: backendError(event.error) } : { kind: "fail", error: backendError(event.error) })
        break
      case "CONTINUE_TEXT":
        settle({ kind: "break", events: textSoFar(model, "Hello "), error: backendError(event.error) })
        sent += "Hello "
        continuing = true
        break
    }
  }
  return { plays, expectedCalls, text: sent + "world", servedModel }
}

const layer = Dispatcher.layerWith({}).pipe(Layer.provideMerge(CapacityQueues.layerTest({
  placements: candidates.map(({ placementId }) => ({ placementId, capacity: 1 })),
  failureThreshold: 100 // keep the circuit out of these paths (tested on its own)
})))

describe("Dispatcher follows the dispatch model", () => {
  it("the generated paths cover retries, failover, continuation and every failure", () => {
    assert.isAbove(paths.length, 20)
    const events = paths.flatMap((p) => p.steps.map((s) => s.event.type))
    for (const type of ["RETRY_DUE", "CONTINUE_TEXT", "FAILED", "SUCCEEDED"]) assert.include(events, type)
    assert.sameMembers([...new Set(paths.map((p) => p.state.context.value as string))], ["done", "failed"])
  })

  it.effect("every generated path, replayed against the real dispatcher", () =>
    Effect.gen(function*() {
      for (const path of paths) {
        const events = path.steps.map((step) => step.event as DispatchEvent)
        const { plays, expectedCalls, text, servedModel } = scriptOf(events)
        const { candidates: scriptedCandidates, calls } = scripted(candidates.map((c) => ({
          ...c,
          plays: plays.get(c.placementId)!.runs,
          resume: plays.get(c.placementId)!.resumes
        })))
        const description = events.map((e) => e.type + ("placementId" in e ? `(${e.placementId})` : "error" in e ? `(${e.error.status})` : "")).join(" → ")
        yield* Effect.gen(function*() {
          const dispatcher = yield* Dispatcher
          const fiber = yield* Effect.forkChild(
            dispatcher.dispatch({ candidates: scriptedCandidates, keyId: "k" }).pipe(
              Effect.flatMap((d) => Stream.runCollect(d.events).pipe(Effect.map((events) => ({ events, servedModel: d.servedModel })))),
              Effect.result
            )
          )
          yield* TestClock.adjust("10 minutes")
          const result = yield* Fiber.join(fiber)
          assert.deepStrictEqual(calls, expectedCalls, description)
          const last = path.state.context.context.lastError
          if (path.state.context.value === "done") {
            assert.isTrue(Result.isSuccess(result), description)
            const { events: sent, servedModel: served } = (result as Result.Success<{ events: Array<CanonicalEvent>; servedModel: string }, unknown>).success
            assert.strictEqual(served, servedModel, description)
            assert.isUndefined(eventOrderViolation(sent), description)
            assert.strictEqual(sent.flatMap((e) => (e.type === "text_delta" ? [e.text] : [])).join(""), text, description)
          } else assert.strictEqual(result._tag === "Failure" && "status" in result.failure ? result.failure.status : undefined, last?.status, description)
          for (const view of yield* (yield* CapacityQueues).view()) assert.strictEqual(view.inUse + view.waiting, 0, description)
        }).pipe(Effect.provide(layer, { local: true }))
      }
    }))
})
