/**
 * The contract every chat dialect implements: a pair of pure translators.
 *
 *   wire request (parsed JSON) ──decode──▶ CanonicalRequest (+ values to echo)
 *   CanonicalEvent* ──streamEncoder──▶ SSE text        CanonicalResponse ──encodeResponse──▶ JSON body
 *
 * Dialects never touch storage, the catalog or backends; `http/chat-endpoint.ts` does the wiring.
 */
import type { Effect } from "effect"
import type { InvalidRequest, Unprocessable } from "../errors.ts"
import type { AnswerSoFar, CanonicalEvent, CanonicalResponse } from "../model/events.ts"
import type { CanonicalRequest } from "../model/request.ts"

/** What decode produced. `request.model` is the model name exactly as the client sent it. */
export interface Decoded<Echo> {
  readonly request: CanonicalRequest
  /** Wire values the encoder must echo back (e.g. Responses `instructions`, `store`, tools as sent). */
  readonly echo: Echo
}

export interface EncodeContext<Echo> {
  /** The dialect-shaped id of this response (`msg_…`, `chatcmpl-…`, `resp_…`, `cmpl-…`). */
  readonly id: string
  /** Canonical id of the model that served the request (also sent as `xsvc-model`). */
  readonly model: string
  /** Unix seconds. */
  readonly createdAt: number
  /** The canonical request as dispatched (model resolved). */
  readonly request: CanonicalRequest
  readonly echo: Echo
  /**
   * The answer as delivered so far, where the call keeps it (a streamed call's `ModelCall.answer`):
   * it has every event before the encoder sees it, so an encoder that repeats a block's text reads
   * it here instead of keeping the text a second time. Absent, an encoder keeps its own.
   */
  readonly answer?: AnswerSoFar | undefined
}

/** An error the stream must end with, in the dialect's error event. */
export interface StreamFailure {
  readonly status: number
  /** Spec error type, e.g. `api_error`, `overloaded_error`, `rate_limit_error`. */
  readonly type: string
  readonly message: string
}

/** Stateful: one per response stream. Each method returns ready-to-write SSE text (may be ""). */
export interface StreamEncoder {
  event(event: CanonicalEvent): string
  /** The terminal error frame(s) when the stream cannot finish; never a silent truncation. */
  error(failure: StreamFailure): string
  /**
   * The texts the last `event` or `error` answer was joined from, when it holds a piece put in
   * without a copy (a Responses envelope repeating megabytes of echo), else undefined; asked right
   * after that call. A writer writes them a slice at a time rather than flattening the whole.
   */
  pieces?(): ReadonlyArray<string> | undefined
  /** Something every client of the dialect ignores (an SSE comment, or Messages `ping`). */
  keepalive(): string
  /** A marker that the stream moved to another placement mid-way (an SSE comment). */
  switchover(note: string): string
}

/** `Echo` has no default: a loose `ChatDialect<unknown>` would let an encoder be given no echo at all. */
export interface ChatDialect<Echo> {
  /** Which permission surface and error shape the dialect's endpoint uses. */
  readonly surface: "messages" | "chat" | "responses" | "completions"
  /** Mints the id of a new response (`msg_…`, `chatcmpl-…`, `resp_…`, `cmpl-…`). */
  newId(): string
  decode(body: unknown): Effect.Effect<Decoded<Echo>, InvalidRequest | Unprocessable>
  /**
   * The echo for a request that was not decoded from this dialect's body (the embedding API
   * answering a request decoded from another dialect, or built by hand): the request's own values.
   */
  defaultEcho(request: CanonicalRequest): Echo
  encodeResponse(response: CanonicalResponse, context: EncodeContext<Echo>): unknown
  streamEncoder(context: EncodeContext<Echo>): StreamEncoder
}
