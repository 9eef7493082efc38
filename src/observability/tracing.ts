/**
 * Spans of a model call, made only when tracing is on (`Telemetry.tracing`): with it off none of
 * these functions is reached, so the request path never pays for a span.
 *
 *   POST /v1/chat/completions           server span (Effect's HTTP server; parent: `traceparent`)
 *   └─ chat svc-atlas-1                  the request, with the OpenTelemetry GenAI attributes
 *      ├─ gateway.queue_wait            each wait for a capacity slot
 *      ├─ chat atlas-a                  each upstream attempt (kind client; `traceparent` sent upstream)
 *      ├─ gateway.failover              from a failed attempt to the next grant (backoff included)
 *      └─ chat atlas-b
 */
import { Clock, Context, Effect, Exit, type Fiber, Option, Tracer } from "effect"
import type { CanonicalRequest } from "../model/request.ts"
import type { Usage } from "../model/usage.ts"
import { shown } from "../errors.ts"
import type { RequestRecord } from "./request-record.ts"

const NO_HEADERS: Readonly<Record<string, string>> = {}

/**
 * The W3C `traceparent` of the fiber's current span, for a call upstream; none without a real
 * tracer. A `traceparent` the client sent is honoured by the server span, so it carries on here.
 */
export const traceHeadersOf = (fiber: Fiber.Fiber<unknown, unknown>): Readonly<Record<string, string>> => {
  if (fiber.getRef(Tracer.Tracer) === Tracer.nativeTracer) return NO_HEADERS
  const span = Context.getOrUndefined(fiber.context, Tracer.ParentSpan)
  if (span === undefined) return NO_HEADERS
  return { traceparent: `00-${span.traceId.padStart(32, "0")}-${span.spanId}-${span.sampled ? "01" : "00"}` }
}

/** `gen_ai.operation.name` of each surface (OpenTelemetry GenAI semantic conventions). */
const operationOf = (surface: string): string =>
  surface === "embeddings" ? "embeddings" : surface === "completions" ? "text_completion" : "chat"

/** The request's own GenAI attributes (`gen_ai.request.*`). */
export const requestAttributes = (request: CanonicalRequest): Record<string, unknown> => {
  const attributes: Record<string, unknown> = { "gateway.stream": request.stream }
  if (request.maxOutputTokens !== undefined) attributes["gen_ai.request.max_tokens"] = request.maxOutputTokens
  if (request.temperature !== undefined) attributes["gen_ai.request.temperature"] = request.temperature
  if (request.topP !== undefined) attributes["gen_ai.request.top_p"] = request.topP
  return attributes
}

/**
 * Opens the request's GenAI span under the current (server) span; `finishRequestSpan` ends it with
 * what the record learned. The span is the parent of the dispatch's spans.
 */
export const startRequestSpan = (record: RequestRecord, requestModel: string, attributes: Record<string, unknown> = {}) =>
  Effect.map(Effect.makeSpan(`${operationOf(record.surface)} ${requestModel}`, {
    kind: "internal",
    attributes: {
      "gen_ai.operation.name": operationOf(record.surface),
      "gen_ai.request.model": requestModel,
      "gateway.request_id": record.requestId,
      "gateway.surface": record.surface,
      ...(record.keyId === undefined ? {} : { "gateway.key_id": record.keyId }),
      ...(record.modelAsked === undefined ? {} : { "gateway.model_asked": shown(record.modelAsked) }),
      ...attributes
    }
  }), (span) => {
    record.span = span
    return span
  })

/** Ends the request's span (at the response, or the stream's end) with the answer's facts. */
export const finishRequestSpan = (record: RequestRecord, span: Tracer.Span, endNanos: bigint) => {
  if (record.servedModel !== undefined) span.attribute("gen_ai.response.model", record.servedModel)
  const usage: Usage | undefined = record.usage
  if (usage !== undefined) {
    span.attribute("gen_ai.usage.input_tokens", usage.inputTokens)
    span.attribute("gen_ai.usage.output_tokens", usage.outputTokens)
  }
  if (record.costMicros !== undefined) span.attribute("gateway.cost_usd", record.costMicros / 1_000_000)
  if (record.placement !== undefined) span.attribute("gateway.placement", record.placement)
  span.attribute("gateway.attempts", record.attempts)
  span.attribute("gateway.queue_wait_ms", record.queueWaitMs)
  span.attribute("http.response.status_code", record.status)
  if (record.error !== undefined) span.attribute("error.type", record.error.type)
  span.end(endNanos, record.status >= 500 || record.status === 499
    ? Exit.fail(new Error(record.error?.message ?? (record.status === 499 ? "client closed the request" : "failed")))
    : Exit.void)
}

/** The spans of one dispatch: queue waits, attempts and failovers, all children of `parent`. */
export const makeDispatchTrace = Effect.fnUntraced(function*() {
  const parent = Option.getOrUndefined(yield* Effect.option(Effect.currentParentSpan))
  const clock = yield* Clock.Clock
  const tracer = yield* Tracer.Tracer
  const now = () => clock.currentTimeNanosUnsafe()
  /** A span opened outside an Effect (a failover starts inside a synchronous callback). */
  const openSpan = (name: string, attributes: Record<string, unknown>, startTime: bigint) => {
    const span = tracer.span({
      name,
      parent: parent === undefined ? Option.none() : Option.some(parent),
      annotations: Context.empty(),
      links: [],
      startTime,
      kind: "internal",
      root: parent === undefined,
      sampled: parent === undefined ? true : parent.sampled
    })
    for (const [key, value] of Object.entries(attributes)) span.attribute(key, value)
    return span
  }
  let failover: Tracer.Span | undefined
  let attemptNo = 0
  return {
    /** Wraps the wait for a slot on `targets`. */
    queueWait: <A, E, R>(wait: Effect.Effect<A, E, R>, targets: ReadonlyArray<string>) =>
      Effect.withSpan(wait, "gateway.queue_wait", { parent, attributes: { "gateway.queue.candidates": targets.join(",") }, captureStackTrace: false }),
    /** Opens an attempt on a granted slot; returns its span (run the call under it). */
    attempt: (placementId: string, modelId: string) =>
      Effect.map(Effect.makeSpan(`chat ${placementId}`, {
        parent,
        kind: "client",
        attributes: { "gen_ai.operation.name": "chat", "gen_ai.request.model": modelId, "gateway.placement": placementId, "gateway.attempt": ++attemptNo }
      }), (span) => {
        if (failover !== undefined) {
          failover.attribute("gateway.failover.to", placementId)
          failover.end(now(), Exit.void)
          failover = undefined
        }
        return span
      }),
    /** Ends an attempt; a failure opens the failover span that the next attempt closes. */
    attemptEnded: (span: Tracer.Span, placementId: string, outcome: string, error: { readonly message: string } | undefined) => {
      span.attribute("gateway.outcome", outcome)
      const at = now()
      span.end(at, outcome === "failure" ? Exit.fail(new Error(error?.message ?? "the attempt failed")) : Exit.void)
      if (outcome === "failure" && failover === undefined) {
        failover = openSpan("gateway.failover", { "gateway.failover.from": placementId, ...(error === undefined ? {} : { "error.message": error.message }) }, at)
      }
    },
    /** The dispatch is over: a failover that found no next attempt ends failed. */
    done: () => {
      if (failover !== undefined) {
        failover.end(now(), Exit.fail(new Error("no candidate took over")))
        failover = undefined
      }
    }
  }
})

export type DispatchTrace = Effect.Success<ReturnType<typeof makeDispatchTrace>>
