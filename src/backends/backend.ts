/**
 * What every backend (simulator, OpenAI-compatible, Anthropic) offers the runtime: a canonical
 * request in, a Stream of canonical events out. A backend never learns which dialect the client
 * used, and holds no Effect services, so the runtime can call it from any fiber.
 */
import type { Effect, Stream } from "effect"
import { Schema } from "effect"
import type { CanonicalEvent, CanonicalResponse } from "../model/events.ts"
import type { CanonicalRequest } from "../model/request.ts"

/** Error types a backend reports, named as the spec's dialect error bodies name them. */
const BackendErrorType = Schema.Literals([
  "api_error",
  "rate_limit_error",
  "invalid_request_error",
  "overloaded_error"
])
export type BackendErrorType = typeof BackendErrorType.Type

/**
 * A backend could not answer, before or during the stream. `retryable` follows the spec's retry
 * rules (429 rate limits and 5xx, including a stream that breaks midway).
 */
export class BackendError extends Schema.TaggedError<BackendError>()("BackendError", {
  status: Schema.Int,
  type: BackendErrorType,
  message: Schema.String,
  retryable: Schema.Boolean,
  retryAfterSeconds: Schema.optionalKey(Schema.Finite)
}) {}

/** Maps an upstream HTTP status to the error the runtime reasons about. */
export const backendErrorFromStatus = (
  status: number,
  message: string,
  retryAfterSeconds?: number
): BackendError => {
  const type: BackendErrorType = status === 429
    ? "rate_limit_error"
    : status === 529 || status === 503
    ? "overloaded_error"
    : status >= 500
    ? "api_error"
    : "invalid_request_error"
  return new BackendError({
    status,
    type,
    message,
    retryable: status === 429 || status >= 500,
    ...(retryAfterSeconds === undefined ? {} : { retryAfterSeconds })
  })
}

/**
 * Faults an operator or a test injects into one placement; backends obey them on every call.
 * - `error`: fail before any event with `status` (default 500);
 * - `hang`: never emit anything (the caller's deadline must fire);
 * - `slow`: ten times slower (see the backend for its timing);
 * - `break-mid-stream`: fail with `status` (default 500) after the first content deltas.
 * `rate` is the share of calls affected, 0..1 (default 1: every call).
 */
export interface FaultSettings {
  readonly mode: "none" | "error" | "hang" | "slow" | "break-mid-stream"
  readonly status?: number
  readonly rate?: number
}

/** Settings of the simulator backend for one placement (config `placements[].simulator`). */
interface SimulatorPlacementSettings {
  /** Milliseconds before the first event. Absent or 0: none. */
  readonly ttftMs?: number | undefined
  /** Output pacing. Absent or 0: as fast as possible. */
  readonly tokensPerSecond?: number | undefined
  /** Extra seed mixed into the generator (a different seed gives a different, still stable, text). */
  readonly seed?: number | undefined
}

/**
 * The live state of one placement (one deployment of a catalog model) that a backend needs.
 * Built by the runtime from config; `faults` is mutable so an admin endpoint or a test can flip
 * it while traffic flows.
 */
export interface PlacementRuntime {
  /** Placement id from config; also scopes the simulator's prompt cache and fault counter. */
  readonly id: string
  /** Canonical catalog id of the model this placement serves. */
  readonly modelId: string
  /** The model name the upstream expects (for the simulator, usually the catalog id). */
  readonly upstreamModel: string
  /** The catalog says the model reasons (`capabilities.reasoning`). */
  readonly reasoning: boolean
  readonly simulator?: SimulatorPlacementSettings | undefined
  /** Where an upstream-backed placement sends requests (openai-compatible, anthropic backends). */
  readonly upstream?: UpstreamTarget | undefined
  faults: FaultSettings
}

/** An upstream endpoint and its credentials (resolved from `apiKeyEnv` at start; never logged). */
export interface UpstreamTarget {
  /** Base URL as configured, e.g. `https://api.example.com` or `http://127.0.0.1:9000/v1`. */
  readonly baseUrl: string
  readonly apiKey?: string | undefined
}

export interface EmbedRequest {
  /** Canonical catalog id of the embedding model. */
  readonly model: string
  readonly texts: ReadonlyArray<string>
  readonly dimensions: number
}

export interface EmbedResult {
  /** One vector per text, in input order, each of `dimensions` floats. */
  readonly vectors: ReadonlyArray<ReadonlyArray<number>>
  readonly inputTokens: number
}

export interface Backend {
  /** Backend kind, as in config (`simulator`, `openai-compatible`, `anthropic`). */
  readonly kind: string
  /** The reply as canonical events (see the contract in `model/events.ts`). Lazy: runs per subscription. */
  stream(request: CanonicalRequest, placement: PlacementRuntime): Stream.Stream<CanonicalEvent, BackendError>
  /**
   * The whole reply at once, for a client that did not stream: the upstream is called without
   * streaming (cheaper for both sides). Absent: the runtime collects `stream`.
   */
  readonly complete?: (request: CanonicalRequest, placement: PlacementRuntime) => Effect.Effect<CanonicalResponse, BackendError>
  /** Present on backends that serve embedding models. */
  readonly embed?: (request: EmbedRequest, placement: PlacementRuntime) => Effect.Effect<EmbedResult, BackendError>
}
