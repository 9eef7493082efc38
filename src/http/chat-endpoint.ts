/**
 * One handler for every chat dialect: decode the wire body, resolve the model (404), check the key
 * may use it (403) and the model can serve the request (400/422), call it, and encode the answer as
 * one JSON body or as SSE. A stream only commits to 200 once the backend produced its first event,
 * so a failure before that is a proper non-2xx error; after it, the dialect's error event ends the
 * stream — never a silent truncation.
 */
import { Clock, Effect, Option, Pull, Stream } from "effect"
import { HttpEffect, HttpServerResponse } from "effect/http"
import type { BackendError } from "../backends/backend.ts"
import { Catalog } from "../catalog/catalog.ts"
import { unmetRequirement } from "../catalog/requirements.ts"
import type { ChatDialect, EncodeContext, StreamFailure } from "../dialects/dialect.ts"
import { type ApiError, InvalidRequest, NotFound, PermissionDenied, ServiceUnavailable } from "../errors.ts"
import { allowsModel } from "../keys/permissions.ts"
import { type CanonicalEvent, collectStream } from "../model/events.ts"
import type { CanonicalRequest } from "../model/request.ts"
import type { ChatModel } from "../config/schema.ts"
import { ModelCaller } from "../runtime/model-caller.ts"
import { readJson } from "./body.ts"
import { jsonResponse } from "./json.ts"
import type { AuthMode, ErrorShape, RequestContext, RouteDef } from "./route.ts"
import { SSE_HEADERS } from "./sse.ts"

/** How a backend failure reaches the client before any byte was sent. */
export const backendFailureToApiError = (error: BackendError): ApiError =>
  error.status >= 400 && error.status < 500 && error.status !== 429
    ? new InvalidRequest({ message: error.message })
    : new ServiceUnavailable({
      status: error.type === "overloaded_error" || error.status === 429 ? 503 : 502,
      message: `The model did not return a response: ${error.message}`,
      ...(error.retryAfterSeconds === undefined ? {} : { retryAfterSeconds: Math.ceil(error.retryAfterSeconds) })
    })

export const backendFailureToStreamFailure = (error: BackendError): StreamFailure => ({
  status: error.status,
  type: error.type,
  message: error.message
})

/** Resolves the model named in a decoded request and checks the key and the model's capabilities. */
export const resolveChatModel = (ctx: RequestContext, name: string) =>
  Effect.gen(function*() {
    const catalog = yield* Catalog
    const model = catalog.resolveChat(name)
    if (model === undefined) {
      return yield* new NotFound({ kind: "resource", message: `The model '${name}' does not exist`, param: "model" })
    }
    if (ctx.key !== undefined && !allowsModel(ctx.key.permissions, model.id)) {
      return yield* new PermissionDenied({ message: `This key is not allowed to use the model ${model.id}` })
    }
    return model
  })

/**
 * The request as dispatched: the canonical model id, hidden reasoning on reasoning models that
 * were not asked to show it (it still counts against the ceiling), and the model's requirements met.
 */
export const prepareRequest = (model: ChatModel, decoded: CanonicalRequest) => {
  const reasoning = model.capabilities.reasoning && !decoded.reasoning.enabled
    ? { ...decoded.reasoning, enabled: true, visible: false }
    : decoded.reasoning
  const request: CanonicalRequest = { ...decoded, model: model.id, reasoning }
  const unmet = unmetRequirement(model, request)
  return unmet === undefined ? Effect.succeed(request) : Effect.fail(unmet)
}

/**
 * Waits for the first chunk of a stream and returns a stream that replays it and continues, so the
 * caller can still choose the HTTP status. Runs in the request's scope: pair it with
 * `HttpEffect.scopeTransferToStream` on the response.
 */
export const startStream = <A, E>(stream: Stream.Stream<A, E>) =>
  Effect.gen(function*() {
    const pull = yield* Stream.toPull(stream)
    const first = yield* pull.pipe(
      Effect.map(Option.some),
      Pull.catchDone(() => Effect.succeed(Option.none<ReadonlyArray<A>>()))
    )
    const rest = Stream.fromPull(Effect.succeed(pull))
    return Option.isSome(first) ? Stream.concat(Stream.fromArray(first.value), rest) : rest
  })

export const chatHandler = <Echo>(dialect: ChatDialect<Echo>) => (ctx: RequestContext) =>
  Effect.gen(function*() {
    const body = yield* readJson(ctx)
    const decoded = yield* dialect.decode(body)
    const model = yield* resolveChatModel(ctx, decoded.request.model)
    const request = yield* prepareRequest(model, decoded.request)
    const { call, context, headers } = yield* startCall(dialect, request, decoded.echo)
    return yield* encodeAnswer(dialect, context, call.events, headers)
  })

/** Calls the model for a prepared request and builds what the dialect's encoder needs. */
export const startCall = <Echo>(dialect: ChatDialect<Echo>, request: CanonicalRequest, echo: Echo) =>
  Effect.gen(function*() {
    const call = yield* (yield* ModelCaller).call(request)
    const context: EncodeContext<Echo> = {
      id: dialect.newId(),
      model: call.servedModel,
      createdAt: Math.floor((yield* Clock.currentTimeMillis) / 1000),
      request,
      echo
    }
    return { call, context, headers: { "xsvc-model": call.servedModel } }
  })

/**
 * Encodes a backend's events for the client: one JSON body, or SSE that commits to 200 only after
 * the first event (earlier failures stay proper errors) and ends with the dialect's error event if
 * the backend fails later.
 */
export const encodeAnswer = <Echo>(
  dialect: ChatDialect<Echo>,
  context: EncodeContext<Echo>,
  events: Stream.Stream<CanonicalEvent, BackendError>,
  headers: Record<string, string>
) =>
  Effect.gen(function*() {
    if (!context.request.stream) {
      const response = yield* collectStream(events).pipe(Effect.mapError(backendFailureToApiError))
      return jsonResponse(dialect.encodeResponse(response, context), { headers })
    }
    const started = yield* startStream(events).pipe(Effect.mapError(backendFailureToApiError))
    const encoder = dialect.streamEncoder(context)
    const sse = started.pipe(
      Stream.map((event) => encoder.event(event)),
      Stream.catch((error: BackendError) => Stream.succeed(encoder.error(backendFailureToStreamFailure(error)))),
      Stream.filter((text) => text !== ""),
      Stream.encodeText
    )
    return HttpEffect.scopeTransferToStream(
      HttpServerResponse.stream(sse, { contentType: "text/event-stream", headers: { ...SSE_HEADERS, ...headers } })
    )
  })

/** A route for a chat dialect's create endpoint. */
export const chatRoute = <Echo>(
  dialect: ChatDialect<Echo>,
  path: string,
  shape: ErrorShape,
  auth: AuthMode
): RouteDef<Catalog | ModelCaller> => ({
  method: "POST",
  path,
  shape,
  auth,
  surface: dialect.surface,
  handler: chatHandler(dialect)
})
