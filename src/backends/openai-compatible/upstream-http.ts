/**
 * The transport to an OpenAI-compatible upstream: a POST over the shared undici pools, with the
 * shared mapping of failures to `BackendError` (backends/upstream/upstream.ts). The caller scrubs
 * the upstream model name.
 */
import { Effect, type Scope } from "effect"
import type { IncomingHttpHeaders } from "node:http"
import type { BackendError, UpstreamTarget } from "../backend.ts"
import { traceHeadersOf } from "../../observability/tracing.ts"
import { connectionError, errorFromResponse, type UpstreamPools } from "../upstream/upstream.ts"
import { acquireInterruptible } from "../../util/scoped.ts"
import { requestBody, type SendableBody } from "../upstream/upstream-body.ts"
import { callStreamed, callWhole, destroyBody, errorText, parseWholeJson, type StreamedBody } from "../upstream/upstream-call.ts"

/**
 * A non-2xx answer from an OpenAI-compatible upstream. The upstream model name in its message is
 * replaced by the caller (`scrubError`), which knows the placement.
 */
const httpError = (status: number, text: string, headers: IncomingHttpHeaders): BackendError =>
  errorFromResponse(status, headers, text, { modelId: "", upstreamModel: "" })

export interface UpstreamCall {
  readonly origin: string
  readonly path: string
  readonly target: UpstreamTarget
  /** Made for this attempt (see `sendable`). */
  readonly body: SendableBody
}

/** `trace`: the W3C `traceparent` of the attempt's span, when traces are exported. */
const requestHeaders = (call: UpstreamCall, accept: string, trace: Readonly<Record<string, string>>): Record<string, string> => ({
  "content-type": "application/json",
  accept,
  ...trace,
  ...(call.target.apiKey === undefined || call.target.apiKey === "" ? {} : { authorization: `Bearer ${call.target.apiKey}` })
})

/** A non-streamed answer: a JSON completion, or (from an upstream that streams regardless) SSE bytes. */
export type WholeAnswer = { readonly kind: "json"; readonly body: unknown } | { readonly kind: "sse"; readonly chunks: ReadonlyArray<Uint8Array> }

/**
 * POSTs the body and reads the whole answer (non-streamed calls). Interrupting the call (client
 * gone, deadline) aborts the upstream request. Some servers stream whatever `stream` says: an
 * event-stream answer is handed back as its bytes, for the caller to decode like a stream.
 */
export const postForWhole = (pools: UpstreamPools, call: UpstreamCall): Effect.Effect<WholeAnswer, BackendError> =>
  Effect.withFiber((fiber) => Effect.tryPromise({
    try: (signal) =>
      callWhole(pools.get(call.origin), { path: call.path, method: "POST", ...requestBody(call.body, requestHeaders(call, "application/json", traceHeadersOf(fiber))) }, signal),
    catch: connectionError
  }).pipe(Effect.flatMap((answer): Effect.Effect<WholeAnswer, BackendError> => {
    const { status, headers } = answer
    if (status < 200 || status >= 300) return Effect.fail(httpError(status, errorText(answer), headers))
    if (String(headers["content-type"] ?? "").includes("text/event-stream")) return Effect.succeed({ kind: "sse", chunks: answer.chunks })
    return Effect.map(parseWholeJson(answer), (body) => ({ kind: "json", body }))
  })))

/**
 * POSTs the body and hands back the streamed response body once a 2xx answer's headers arrive. The
 * body is released (its socket destroyed if unread) when the caller's scope closes — the stream's,
 * when it ends or is interrupted, e.g. when the client goes away; interrupted before the headers,
 * the call is aborted at once. A generator made once, not per call (see `answer` in
 * http/chat-answer.ts).
 */
export const postForStream: (pools: UpstreamPools, call: UpstreamCall) => Effect.Effect<StreamedBody, BackendError, Scope.Scope> = Effect.fnUntraced(function*(pools: UpstreamPools, call: UpstreamCall) {
  const headers = requestHeaders(call, "text/event-stream", yield* Effect.withFiber((fiber) => Effect.succeed(traceHeadersOf(fiber))))
  const response = yield* acquireInterruptible(
    Effect.tryPromise({
      try: (signal) => callStreamed(pools.get(call.origin), { path: call.path, method: "POST", ...requestBody(call.body, headers) }, signal),
      catch: connectionError
    }),
    destroyBody
  )
  if (response.statusCode < 200 || response.statusCode >= 300) {
    const text = yield* Effect.tryPromise(() => response.body.text()).pipe(Effect.orElseSucceed(() => ""))
    return yield* httpError(response.statusCode, text, response.headers)
  }
  return response.body
})
