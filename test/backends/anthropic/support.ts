/** Shared by the Anthropic backend tests: a placement pointing at a test upstream, and a stream runner. */
import { Effect, Stream } from "effect"
import type { BackendError, PlacementRuntime } from "../../../src/backends/backend.ts"
import type { CanonicalEvent } from "../../../src/model/events.ts"

/** The upstream's own model name: it must never reach canonical events. */
export const SECRET_MODEL = "upstream-model-secret-7"
export const UPSTREAM_KEY = "sk-upstream-test-key"

export const placementFor = (baseUrl: string, apiKey: string | undefined = UPSTREAM_KEY): PlacementRuntime => ({
  id: "anthropic-a",
  modelId: "svc-atlas-1",
  upstreamModel: SECRET_MODEL,
  reasoning: true,
  upstream: { baseUrl, apiKey },
  faults: { mode: "none" }
})

/** Every event the stream produced, and the error it ended with (if any). */
export const runAll = async (events: Stream.Stream<CanonicalEvent, BackendError>) => {
  const seen: Array<CanonicalEvent> = []
  const error = await Effect.runPromise(
    Stream.runForEach(events, (event) => Effect.sync(() => seen.push(event))).pipe(
      Effect.match({ onSuccess: () => undefined, onFailure: (e: BackendError) => e })
    )
  )
  return { events: seen, error }
}
