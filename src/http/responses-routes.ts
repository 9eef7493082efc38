/**
 * The Responses surface: `POST /v1/responses` (chaining with `previous_response_id`, storing with
 * `store: true`) and `GET /v1/responses/{id}` (the stored bytes, unchanged).
 *
 * The create flow is the generic chat flow (`chat-endpoint.ts`) with two additions: the stored
 * conversation of the previous response goes before the new input, and a stored response is
 * saved before the client sees its end, so a retrieve right after the answer always finds it.
 * Without `store` nothing is written (spec rule 2) and the hot path stays free of SQL writes.
 */
import { Effect, Stream } from "effect"
import { HttpServerResponse } from "effect/http"
import type { EncodeContext } from "../dialects/dialect.ts"
import type { SqlError } from "effect/sql"
import { BackendError } from "../backends/backend.ts"
import { responsesDialect, type ResponsesEcho } from "../dialects/responses/index.ts"
import { InvalidRequest, NotFound, Unprocessable } from "../errors.ts"
import { type CanonicalEvent, type CanonicalResponse, makeResponseBuilder } from "../model/events.ts"
import { ResponsesRepo } from "../responses/responses-repo.ts"
import { continueConversation, emptyTranscript, readTranscript, withAnswer } from "../responses/transcript.ts"
import { readJson } from "./body.ts"
import { answerChat, type CallFailure } from "./chat-answer.ts"
import { prepareRequest } from "../catalog/requirements.ts"
import { resolveChatModel } from "./chat-endpoint.ts"
import type { RouteServices } from "./route-services.ts"
import { type RequestContext, requireKey, type RouteDef } from "./route.ts"

const keyIdOf = (ctx: RequestContext) => Effect.map(requireKey(ctx), (key) => key.id)

/** Spec rule 1: an unknown, unstored or foreign id is a 404 `invalid_request_error` naming only that id. */
const loadPrevious = (repo: ResponsesRepo["Service"], keyId: string, id: string | null) =>
  Effect.gen(function*() {
    if (id === null) return emptyTranscript
    const stored = yield* repo.find(keyId, id)
    if (stored === undefined) {
      return yield* new NotFound({ kind: "chain", message: `Previous response with id '${id}' not found.`, param: "previous_response_id" })
    }
    return readTranscript(stored.transcript)
  })

/** The shared model checks name Messages/Chat fields; a Responses client sent these instead. */
const RESPONSES_PARAM: Record<string, string> = { max_tokens: "max_output_tokens", messages: "input", response_format: "text.format" }
const renameParam = (error: InvalidRequest | Unprocessable) => {
  const param = error.param === undefined ? undefined : RESPONSES_PARAM[error.param] ?? error.param
  const fields = { message: error.message, ...(param === undefined ? {} : { param }) }
  return error._tag === "InvalidRequest" ? new InvalidRequest(fields) : new Unprocessable(fields)
}

/**
 * Saves the response when its last event arrives, before that event is encoded, so the client
 * never sees `response.completed` for a response that is not stored yet. A failed save ends the
 * stream with the error event instead: the client asked for storage and did not get it.
 */
const saveOnStop = (
  events: Stream.Stream<CanonicalEvent, CallFailure>,
  save: (response: CanonicalResponse) => Effect.Effect<void, SqlError.SqlError>
) => {
  const builder = makeResponseBuilder()
  return events.pipe(Stream.mapEffect((event): Effect.Effect<CanonicalEvent, CallFailure> => {
    builder.add(event)
    if (event.type !== "message_stop") return Effect.succeed(event)
    return save(builder.finish()).pipe(
      Effect.as(event),
      Effect.catchTag("SqlError", (error) =>
        Effect.logError("could not store a streamed response", error).pipe(Effect.andThen(Effect.fail(
          new BackendError({ status: 503, type: "api_error", message: "The response could not be stored: storage is unavailable", retryable: true })
        ))))
    )
  }))
}

const createResponse = (ctx: RequestContext) =>
  Effect.gen(function*() {
    const keyId = yield* keyIdOf(ctx)
    const decoded = yield* responsesDialect.decode(yield* readJson(ctx))
    const repo = yield* ResponsesRepo
    const previous = yield* loadPrevious(repo, keyId, decoded.echo.previousResponseId)
    const { request: wanted, conversation } = continueConversation(previous, decoded)
    const model = yield* resolveChatModel(ctx, wanted.model)
    const request = yield* prepareRequest(model, wanted).pipe(Effect.mapError(renameParam))
    if (!decoded.echo.store) return yield* answerChat(responsesDialect, ctx, request, decoded.echo)
    const save = (response: CanonicalResponse, context: EncodeContext<ResponsesEcho>, body: string) =>
      repo.save({ id: context.id, keyId, model: context.model, body, transcript: withAnswer(conversation, response) })
    // The terminal stream event holds encodeResponse of the same collected events, so the stored
    // bytes are exactly the `response` inside `response.completed`.
    return yield* answerChat(responsesDialect, ctx, request, decoded.echo, {
      collected: save,
      events: (events, context) =>
        saveOnStop(events, (response) => save(response, context, JSON.stringify(responsesDialect.encodeResponse(response, context))))
    })
  })

const retrieveResponse = (ctx: RequestContext) =>
  Effect.gen(function*() {
    const keyId = yield* keyIdOf(ctx)
    const id = ctx.params.id
    const stored = yield* (yield* ResponsesRepo).find(keyId, id)
    if (stored === undefined) return yield* new NotFound({ kind: "resource", message: `No stored response with id '${id}'` })
    return HttpServerResponse.text(stored.body, { contentType: "application/json" })
  })

export const responsesRoutes: ReadonlyArray<RouteDef<RouteServices>> = [
  { method: "POST", path: "/v1/responses", shape: "openai", auth: "bearer", surface: "responses", handler: createResponse },
  { method: "GET", path: "/v1/responses/{id}", shape: "openai", auth: "bearer", surface: "responses", handler: retrieveResponse }
]
