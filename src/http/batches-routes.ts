/**
 * OpenAI's Batch API (Bearer, OpenAI error shape, permission surface `batches`): create from an
 * uploaded JSONL file, retrieve, list, cancel. Batches belong to the key: another key's id (and
 * another key's input file) is 404. See src/batches/ for execution.
 */
import { Effect, Schema } from "effect"
import { BatchWorkers } from "../batches/batch-workers.ts"
import { openaiBatchView } from "../batches/batch-views.ts"
import { BatchesRepo } from "../batches/batches-repo.ts"
import { OPENAI_BATCH_ENDPOINTS } from "../batches/execute-request.ts"
import { OpenAiMetadata } from "../dialects/chat/wire-decode.ts"
import { MAX_BATCH_REQUESTS, parseOpenAiInput } from "../batches/openai-input.ts"
import { InvalidRequest, NotFound } from "../errors.ts"
import { FilesRepo } from "../files/files-repo.ts"
import { decodeWith, readJson } from "./body.ts"
import { jsonResponse } from "./json.ts"
import { type RequestContext, requireKey, routeFamily, type RouteDef } from "./route.ts"
import { limitParam } from "./limit-param.ts"

const CreateBody = Schema.Struct({
  input_file_id: Schema.String,
  endpoint: Schema.Literals(OPENAI_BATCH_ENDPOINTS),
  completion_window: Schema.Literal("24h"),
  metadata: Schema.optional(Schema.NullOr(OpenAiMetadata)),
  output_expires_after: Schema.optional(Schema.Unknown)
})
const decodeCreate = decodeWith(CreateBody)

const LIST_LIMIT = { default: 20, max: 100 }

const create = Effect.fnUntraced(function*(ctx: RequestContext) {
  const body = yield* decodeCreate(yield* readJson(ctx, { storable: true }))
  const key = yield* requireKey(ctx)
  const file = yield* (yield* FilesRepo).content(key.id, body.input_file_id).pipe(
    Effect.catchTag("NotFound", () =>
      Effect.fail(new NotFound({ kind: "resource", message: `input_file_id: no file with id ${body.input_file_id}`, param: "input_file_id" })))
  )
  if (file.file.purpose !== "batch") {
    return yield* new InvalidRequest({ message: `input_file_id: the file ${body.input_file_id} was uploaded with purpose ${file.file.purpose}, not batch`, param: "input_file_id" })
  }
  const parsed = yield* parseOpenAiInput(file.content, body.endpoint)
  if (parsed._tag === "WrongSize") {
    return yield* new InvalidRequest({
      message: `input_file_id: a batch holds 1 to ${MAX_BATCH_REQUESTS} requests; the file has ${parsed.lines > MAX_BATCH_REQUESTS ? `more than ${MAX_BATCH_REQUESTS}` : parsed.lines}`,
      param: "input_file_id"
    })
  }
  const workers = yield* BatchWorkers
  const batch = yield* (yield* BatchesRepo).create(key.id, {
    kind: "openai",
    endpoint: body.endpoint,
    inputFileId: body.input_file_id,
    metadata: body.metadata ?? null,
    completionWindow: body.completion_window,
    windowMs: workers.windowMs,
    requests: parsed._tag === "Valid" ? parsed.requests : [],
    ...(parsed._tag === "Invalid" ? { validationErrors: { object: "list", data: parsed.errors } } : {})
  })
  if (parsed._tag === "Valid") yield* workers.wake()
  return jsonResponse(openaiBatchView(batch))
})

const retrieve = Effect.fnUntraced(function*(ctx: RequestContext) {
  return jsonResponse(openaiBatchView(yield* (yield* BatchesRepo).get((yield* requireKey(ctx)).id, "openai", ctx.params.id)))
})

const list = Effect.fnUntraced(function*(ctx: RequestContext) {
  const limit = yield* limitParam(ctx, LIST_LIMIT)
  const after = ctx.query.get("after") ?? undefined
  const page = yield* (yield* BatchesRepo).list((yield* requireKey(ctx)).id, "openai", { limit, ...(after === undefined ? {} : { after }) })
  const data = page.data.map(openaiBatchView)
  return jsonResponse({ object: "list", data, first_id: data[0]?.id ?? null, last_id: data[data.length - 1]?.id ?? null, has_more: page.hasMore })
})

const cancel = Effect.fnUntraced(function*(ctx: RequestContext) {
  return jsonResponse(openaiBatchView(yield* (yield* BatchesRepo).cancel((yield* requireKey(ctx)).id, "openai", ctx.params.id)))
})

type Services = BatchesRepo | BatchWorkers | FilesRepo

const route = routeFamily<Services>({ shape: "openai", auth: "bearer", surface: "batches" })

export const batchesRoutes: ReadonlyArray<RouteDef<Services>> = [
  route("POST", "/v1/batches", create),
  route("GET", "/v1/batches", list),
  route("GET", "/v1/batches/{id}", retrieve),
  route("POST", "/v1/batches/{id}/cancel", cancel)
]
