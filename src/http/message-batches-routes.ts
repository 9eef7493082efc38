/**
 * Anthropic's Message Batches API (`x-api-key` or Bearer, Messages error shape, permission surface
 * `batches`): create, retrieve, list (`before_id`, `after_id`, `limit`), cancel, delete (ended
 * batches only) and results (JSONL, in request order, once the batch has ended). Each request's
 * `params` is a non-streamed Messages request; its problems become that request's `errored`
 * result, while the envelope (`requests`, each `custom_id`) is checked here: 400 naming the field.
 */
import { Effect } from "effect"
import { BatchWorkers } from "../batches/batch-workers.ts"
import { messageBatchView } from "../batches/batch-views.ts"
import { BatchesRepo } from "../batches/batches-repo.ts"
import { MAX_BATCH_REQUESTS } from "../batches/openai-input.ts"
import { jsonTextInSlices } from "../util/sliced-stringify.ts"
import { InvalidRequest } from "../errors.ts"
import { readJson } from "./body.ts"
import { bytesResponse, jsonResponse } from "./json.ts"
import { type RequestContext, requireKey, routeFamily, type RouteDef } from "./route.ts"
import { limitParam } from "./limit-param.ts"
import { isPlainObject } from "../util/json.ts"

const utf8 = new TextEncoder()

const CUSTOM_ID = /^[a-zA-Z0-9_-]{1,64}$/
const LIST_LIMIT = { default: 20, max: 1_000 }

/** The origin the client reached us at, for the absolute `results_url`. */
const originOf = (ctx: RequestContext) => {
  const host = ctx.headers["x-forwarded-host"] ?? ctx.headers.host ?? "127.0.0.1"
  const proto = ctx.headers["x-forwarded-proto"] === "https" ? "https" : "http"
  return `${proto}://${host}`
}

/** Characters of serialized requests between two yields to the event loop. */
const SERIALIZE_BUDGET = 256 * 1024

/**
 * The batch's requests with their params serialized for storage. A body may carry 32 MiB: each
 * request is serialized in slices when large (`jsonTextInSlices`), and the loop yields every
 * `SERIALIZE_BUDGET` characters, so a thousand mid-sized requests do not hold the event loop either.
 */
const validRequests = Effect.fnUntraced(function*(body: unknown) {
  const requests = isPlainObject(body) ? body.requests : undefined
  if (!Array.isArray(requests) || requests.length < 1 || requests.length > MAX_BATCH_REQUESTS) {
    return yield* new InvalidRequest({ message: `requests: expected an array of 1 to ${MAX_BATCH_REQUESTS} requests`, param: "requests" })
  }
  const seen = new Set<string>()
  const out: Array<{ customId: string; params: string }> = []
  let budget = 0
  for (const [i, request] of requests.entries()) {
    if (!isPlainObject(request)) return yield* new InvalidRequest({ message: `requests[${i}]: expected an object with custom_id and params`, param: `requests[${i}]` })
    const customId = request.custom_id
    if (typeof customId !== "string" || !CUSTOM_ID.test(customId)) {
      return yield* new InvalidRequest({
        message: `requests[${i}].custom_id: expected 1 to 64 characters of letters, digits, _ and -`,
        param: `requests[${i}].custom_id`
      })
    }
    if (seen.has(customId)) {
      return yield* new InvalidRequest({ message: `requests[${i}].custom_id: '${customId}' is used by an earlier request; custom_id must be unique`, param: `requests[${i}].custom_id` })
    }
    seen.add(customId)
    if (!isPlainObject(request.params)) {
      return yield* new InvalidRequest({ message: `requests[${i}].params: expected a Messages request object`, param: `requests[${i}].params` })
    }
    if (request.params.stream === true) {
      return yield* new InvalidRequest({ message: `requests[${i}].params.stream: batch requests cannot stream`, param: `requests[${i}].params.stream` })
    }
    const params = yield* jsonTextInSlices(request.params)
    out.push({ customId, params })
    budget += params.length
    if (budget > SERIALIZE_BUDGET) {
      budget = 0
      yield* Effect.yieldNow
    }
  }
  return out
})

const create = Effect.fnUntraced(function*(ctx: RequestContext) {
  const requests = yield* validRequests(yield* readJson(ctx, { storable: true }))
  const workers = yield* BatchWorkers
  const batch = yield* (yield* BatchesRepo).create((yield* requireKey(ctx)).id, { kind: "messages", endpoint: "/v1/messages", windowMs: workers.windowMs, requests })
  yield* workers.wake()
  return jsonResponse(messageBatchView(batch, originOf(ctx)))
})

const retrieve = Effect.fnUntraced(function*(ctx: RequestContext) {
  return jsonResponse(messageBatchView(yield* (yield* BatchesRepo).get((yield* requireKey(ctx)).id, "messages", ctx.params.id), originOf(ctx)))
})

const list = Effect.fnUntraced(function*(ctx: RequestContext) {
  const limit = yield* limitParam(ctx, LIST_LIMIT)
  const after = ctx.query.get("after_id") ?? undefined
  const before = ctx.query.get("before_id") ?? undefined
  if (after !== undefined && before !== undefined) {
    return yield* new InvalidRequest({ message: "before_id: give before_id or after_id, not both", param: "before_id" })
  }
  const page = yield* (yield* BatchesRepo).list((yield* requireKey(ctx)).id, "messages", {
    limit,
    ...(after === undefined ? {} : { after }),
    ...(before === undefined ? {} : { before })
  })
  const origin = originOf(ctx)
  const data = page.data.map((b) => messageBatchView(b, origin))
  return jsonResponse({ data, has_more: page.hasMore, first_id: data[0]?.id ?? null, last_id: data[data.length - 1]?.id ?? null })
})

const cancel = Effect.fnUntraced(function*(ctx: RequestContext) {
  return jsonResponse(messageBatchView(yield* (yield* BatchesRepo).cancel((yield* requireKey(ctx)).id, "messages", ctx.params.id), originOf(ctx)))
})

const remove = Effect.fnUntraced(function*(ctx: RequestContext) {
  yield* (yield* BatchesRepo).remove((yield* requireKey(ctx)).id, "messages", ctx.params.id)
  return jsonResponse({ id: ctx.params.id, type: "message_batch_deleted" })
})

const results = Effect.fnUntraced(function*(ctx: RequestContext) {
  const repo = yield* BatchesRepo
  const batch = yield* repo.get((yield* requireKey(ctx)).id, "messages", ctx.params.id)
  if (batch.state.phase !== "ended") {
    return yield* new InvalidRequest({ message: `The results of ${batch.id} are available once it has ended (it is ${messageBatchView(batch, "").processing_status})` })
  }
  // Read, and encoded, a page at a time: the results of long answers may be tens of MiB.
  const pieces: Array<Uint8Array> = []
  yield* repo.forEachResultPage(batch.id, (rows) =>
    Effect.sync(() => {
      let text = ""
      for (const row of rows) {
        const result = row.result ?? JSON.stringify({ type: row.state })
        text += `{"custom_id":${JSON.stringify(row.customId)},"result":${result}}\n`
      }
      pieces.push(utf8.encode(text))
    }))
  return bytesResponse(pieces, { contentType: "application/x-jsonl" })
})

type Services = BatchesRepo | BatchWorkers

const route = routeFamily<Services>({ shape: "messages", auth: "messages", surface: "batches" })

export const messageBatchesRoutes: ReadonlyArray<RouteDef<Services>> = [
  route("POST", "/v1/messages/batches", create),
  route("GET", "/v1/messages/batches", list),
  route("GET", "/v1/messages/batches/{id}", retrieve),
  route("DELETE", "/v1/messages/batches/{id}", remove),
  route("POST", "/v1/messages/batches/{id}/cancel", cancel),
  route("GET", "/v1/messages/batches/{id}/results", results)
]
