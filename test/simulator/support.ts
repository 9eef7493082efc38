/** Shared helpers for simulator tests: run a request to its events and its collected response. */
import { Effect, Stream } from "effect"
import type { PlacementRuntime } from "../../src/backends/backend.ts"
import { makeSimulatorBackend, simulatorPlacement } from "../../src/backends/simulator/simulator.ts"
import { userMessage } from "../../src/model/content.ts"
import { eventOrderViolation } from "../../src/model/event-order.ts"
import type { CanonicalEvent, CanonicalResponse } from "../../src/model/events.ts"
import { collect } from "../../src/model/events.ts"
import type { CanonicalRequest, CanonicalRequestInit } from "../../src/model/request.ts"
import { makeRequest } from "../../src/model/request.ts"

export const plainModel = simulatorPlacement({ modelId: "svc-sim-plain" })
export const reasoningModel = simulatorPlacement({ modelId: "svc-sim-reasoner", reasoning: true })

export const ask = (text: string, init: Partial<CanonicalRequestInit> = {}): CanonicalRequest =>
  makeRequest({ model: "svc-sim-plain", messages: [userMessage(text)], ...init })

/** Runs one request on a fresh simulator; fails the test if the event order breaks the contract. */
export const runEvents = (
  request: CanonicalRequest,
  placement: PlacementRuntime = plainModel,
  backend = makeSimulatorBackend()
): Effect.Effect<{ events: Array<CanonicalEvent>; response: CanonicalResponse }, unknown> =>
  Stream.runCollect(backend.stream(request, placement)).pipe(
    Effect.flatMap((events) => {
      const violation = eventOrderViolation(events)
      return violation === undefined
        ? Effect.succeed({ events, response: collect(events) })
        : Effect.die(new Error(`event order: ${violation}`))
    })
  )

export const textOf = (response: CanonicalResponse): string =>
  response.content.map((block) => (block.type === "text" ? block.text : "")).join("")
