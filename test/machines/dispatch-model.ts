/** The bounded event set that the model-based tests walk the dispatch machine with. */
import type { AttemptError, DispatchEvent, DispatchState } from "../../machines/dispatch.ts"

export const candidates = [
  { placementId: "p1", modelId: "svc-one", canResume: true },
  { placementId: "p2", modelId: "svc-two", canResume: true }
]

export const errors = {
  serverError: { status: 500, retryable: true },
  rateLimited: { status: 429, retryable: true, retryAfterSeconds: 7 },
  // Longer than the gateway waits out: failover yes, a back-off no.
  rateLimitedForAnHour: { status: 429, retryable: true, retryAfterSeconds: 3_600 },
  badRequest: { status: 400, retryable: false }
} satisfies Record<string, AttemptError>

export const dispatchEvents = (_: DispatchState): Array<DispatchEvent> => [
  ...candidates.map(({ placementId }) => ({ type: "GRANTED", placementId }) as const),
  { type: "FIRST_BYTE" },
  { type: "SUCCEEDED" },
  ...Object.values(errors).map((error) => ({ type: "FAILED", error }) as const),
  { type: "CONTINUE_TEXT", error: errors.serverError },
  { type: "CONTINUE_TEXT", error: errors.badRequest },
  { type: "RETRY_DUE" },
  { type: "QUEUE_TIMEOUT" },
  { type: "CIRCUITS", open: candidates.map((c) => c.placementId) }
]

export const serializeDispatch = (state: DispatchState) => JSON.stringify(state)
