/**
 * The Responses surface:
 *  - `POST /v1/responses`: the generic chat flow (`chat-endpoint.ts`) plus what storage adds —
 *    `item_reference`s resolve to the caller's stored items, the stored conversation of
 *    `previous_response_id` goes before the new input, and with `store: true` the response is
 *    saved before the client sees its end (`stored-responses/stored-turn.ts`). Without `store` nothing is
 *    written (spec rule 2) and the hot path stays free of SQL writes;
 *  - `GET /v1/responses/{id}`: the stored bytes, unchanged; with `?stream=true` the stored
 *    response replayed as its event stream (`starting_after` honoured);
 *  - `DELETE /v1/responses/{id}` and `GET /v1/responses/{id}/input_items`.
 * Every id is scoped to the key: another key's id is a 404, worded as for an unknown one.
 */
import { Effect } from "effect"
import { Catalog } from "../catalog/catalog.ts"
import { prepareRequest } from "../catalog/requirements.ts"
import { decodeWithItems } from "../dialects/responses/decode.ts"
import { responsesDialect } from "../dialects/responses/index.ts"
import { referencedItemIds } from "../dialects/responses/input.ts"
import { prepareEchoJson } from "../dialects/responses/echo-json.ts"
import { type ReplayRecord, replayFrames } from "../dialects/responses/replay.ts"
import { InvalidRequest, NotFound, shown, Unprocessable } from "../errors.ts"
import { ResponsesRepo } from "../stored-responses/responses-repo.ts"
import { planStore, storeOnStop } from "../stored-responses/stored-turn.ts"
import { continueConversation, readTranscript } from "../stored-responses/transcript.ts"
import { readJson } from "./body.ts"
import { answerChat } from "./chat-answer.ts"
import { resolveChatModel } from "./chat-endpoint.ts"
import { bytesResponse, jsonResponse } from "./json.ts"
import type { RouteServices } from "./route-services.ts"
import { type RequestContext, requireKey, type RouteDef, routeFamily } from "./route.ts"
import { SSE_HEADERS } from "./sse.ts"
import { isPlainObject } from "../util/json.ts"

/** Spec rule 1: an unknown, unstored or foreign id is a 404 `invalid_request_error` naming only that id. */
const loadPrevious = Effect.fnUntraced(function*(repo: ResponsesRepo["Service"], keyId: string, id: string | null) {
  if (id === null) return undefined
  const stored = yield* repo.conversation(keyId, id)
  if (stored === undefined) {
    return yield* new NotFound({ kind: "chain", message: `Previous response with id '${shown(id)}' not found.`, param: "previous_response_id" })
  }
  return stored
})

/** The shared model checks name Messages/Chat fields; a Responses client sent these instead. */
const RESPONSES_PARAM: Record<string, string> = { max_tokens: "max_output_tokens", messages: "input", response_format: "text.format" }
const renameParam = (error: InvalidRequest | Unprocessable) => {
  const param = error.param === undefined ? undefined : RESPONSES_PARAM[error.param] ?? error.param
  const fields = { message: error.message, ...(param === undefined ? {} : { param }) }
  return error._tag === "InvalidRequest" ? new InvalidRequest(fields) : new Unprocessable(fields)
}

const createResponse = Effect.fnUntraced(function*(ctx: RequestContext) {
  const key = yield* requireKey(ctx)
  const raw = yield* readJson(ctx)
  const repo = yield* ResponsesRepo
  const items = yield* repo.findItems(key.id, referencedItemIds(isPlainObject(raw) ? raw.input : undefined))
  const resolve = (id: string) => items.get(id)
  const decoded = yield* decodeWithItems(raw, resolve)
  const previous = yield* loadPrevious(repo, key.id, decoded.echo.previousResponseId)
  const { request: wanted, conversation } = continueConversation(readTranscript(previous?.transcript), decoded)
  const model = yield* resolveChatModel(ctx, wanted.model)
  const viaHandle = (yield* Catalog).isCompatibilityHandle(wanted.model)
  const request = yield* prepareRequest(model, wanted, { viaHandle }).pipe(Effect.mapError(renameParam))
  // A stream's envelope frames repeat the echo: its large fields' JSON is made now, in slices.
  if (request.stream) yield* prepareEchoJson(decoded.echo)
  if (!decoded.echo.store) return yield* answerChat(responsesDialect, ctx, request, decoded.echo)
  // `decode` accepted the body, so `input` is a string or a list.
  const plan = yield* planStore(previous, conversation, (raw as { input: string | ReadonlyArray<unknown> }).input, resolve)
  return yield* answerChat(responsesDialect, ctx, request, decoded.echo, {
    events: (events, context) => storeOnStop(events, context, key.id, plan, repo.save)
  })
})

const notStored = (id: string) => new NotFound({ kind: "resource", message: `No stored response with id '${id}'` })

/** A query flag: absent, `true` or `false` (400 otherwise). */
const queryFlag = Effect.fnUntraced(function*(ctx: RequestContext, name: string) {
  const value = ctx.query.get(name)
  if (value === null || value === "false") return false
  if (value === "true") return true
  return yield* new InvalidRequest({ message: `${name}: expected true or false`, param: name })
})

/** A non-negative integer query parameter, or undefined when absent. */
const queryInt = Effect.fnUntraced(function*(ctx: RequestContext, name: string, bounds: { readonly min: number; readonly max: number }) {
  const value = ctx.query.get(name)
  if (value === null) return undefined
  const n = Number(value)
  if (!/^\d+$/.test(value) || n < bounds.min || n > bounds.max) {
    return yield* new InvalidRequest({ message: `${name}: expected an integer from ${bounds.min} to ${bounds.max}`, param: name })
  }
  return n
})

const replayResponse = Effect.fnUntraced(function*(ctx: RequestContext, keyId: string, id: string) {
  const startingAfter = yield* queryInt(ctx, "starting_after", { min: 0, max: Number.MAX_SAFE_INTEGER })
  const stored = yield* (yield* ResponsesRepo).replay(keyId, id)
  if (stored === undefined) return yield* notStored(id)
  if (stored.replay === null) {
    return yield* new InvalidRequest({ message: `The response '${id}' was stored before streamed replay existed; retrieve it without stream=true`, param: "stream" })
  }
  const frames = yield* replayFrames(id, stored.model, stored.replay as ReplayRecord, startingAfter)
  return bytesResponse(frames, { contentType: "text/event-stream", headers: SSE_HEADERS })
})

const retrieveResponse = Effect.fnUntraced(function*(ctx: RequestContext) {
  const key = yield* requireKey(ctx)
  const id = ctx.params.id
  if (yield* queryFlag(ctx, "stream")) return yield* replayResponse(ctx, key.id, id)
  const stored = yield* (yield* ResponsesRepo).find(key.id, id)
  if (stored === undefined) return yield* notStored(id)
  return bytesResponse(stored.body, { contentType: "application/json" })
})

/** As OpenAI: `{id, object: "response", deleted: true}`; later reads, chains and references are 404s. */
const deleteResponse = Effect.fnUntraced(function*(ctx: RequestContext) {
  const key = yield* requireKey(ctx)
  const id = ctx.params.id
  if (!(yield* (yield* ResponsesRepo).remove(key.id, id))) return yield* notStored(id)
  return jsonResponse({ id, object: "response", deleted: true })
})

/**
 * The items the model was given, earlier turns of a chain included, as a cursor page (the shape
 * the SDK's `responses.inputItems.list` pages through): `order` (default `desc`, newest first),
 * `limit` 1–100 (default 20), `after` an item id of the previous page.
 */
const listInputItems = Effect.fnUntraced(function*(ctx: RequestContext) {
  const key = yield* requireKey(ctx)
  const id = ctx.params.id
  const limit = (yield* queryInt(ctx, "limit", { min: 1, max: 100 })) ?? 20
  const order = ctx.query.get("order") ?? "desc"
  if (order !== "asc" && order !== "desc") return yield* new InvalidRequest({ message: "order: expected asc or desc", param: "order" })
  const stored = yield* (yield* ResponsesRepo).inputItems(key.id, id)
  if (stored === undefined) return yield* notStored(id)
  const ordered = (order === "asc" ? stored : [...stored].reverse()) as ReadonlyArray<{ readonly id?: string }>
  const after = ctx.query.get("after")
  let start = 0
  if (after !== null) {
    const at = ordered.findIndex((item) => item.id === after)
    if (at === -1) return yield* new InvalidRequest({ message: `after: no input item with id '${shown(after)}' in this response`, param: "after" })
    start = at + 1
  }
  const data = ordered.slice(start, start + limit)
  return jsonResponse({
    object: "list",
    data,
    first_id: data[0]?.id ?? null,
    last_id: data.at(-1)?.id ?? null,
    has_more: start + limit < ordered.length
  })
})

const route = routeFamily<RouteServices>({ shape: "openai", auth: "bearer", surface: "responses" })

export const responsesRoutes: ReadonlyArray<RouteDef<RouteServices>> = [
  route("POST", "/v1/responses", createResponse),
  route("GET", "/v1/responses/{id}", retrieveResponse),
  route("DELETE", "/v1/responses/{id}", deleteResponse),
  route("GET", "/v1/responses/{id}/input_items", listInputItems)
]
