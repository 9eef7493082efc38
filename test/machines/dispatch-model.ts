/** The bounded event set that the model-based tests walk the dispatch machine with. */
import type { AttemptError, DispatchEvent, DispatchSnapshot } from "../../machines/dispatch.ts"

export const candidates = [
  { placementId: "p1", modelId: "svc-one" },
  { placementId: "p2", modelId: "svc-two" }
]

export const errors = {
  serverError: { status: 500, retryable: true },
  rateLimited: { status: 429, retryable: true, retryAfterSeconds: 7 },
  badRequest: { status: 400, retryable: false }
} satisfies Record<string, AttemptError>

export const dispatchEvents = (_: DispatchSnapshot): Array<DispatchEvent> => [
  ...candidates.map(({ placementId }) => ({ type: "GRANTED", placementId }) as const),
  { type: "FIRST_BYTE" },
  { type: "SUCCEEDED" },
  ...Object.values(errors).map((error) => ({ type: "FAILED", error }) as const),
  { type: "CONTINUE_TEXT", error: errors.serverError },
  { type: "CONTINUE_TEXT", error: errors.badRequest },
  { type: "RETRY_DUE" },
  { type: "QUEUE_TIMEOUT" }
]

export const serializeDispatch = (snapshot: DispatchSnapshot) => JSON.stringify({ value: snapshot.value, context: snapshot.context })
