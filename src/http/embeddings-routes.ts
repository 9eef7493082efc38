/**
 * `POST /v1/embeddings` (OpenAI shape, Bearer): the seven embedding models, a string or an array of
 * strings, `encoding_format` `float` or `base64` (the Node SDK asks for base64 unless told
 * otherwise, and float arrays would corrupt its results silently), `dimensions` where the model
 * allows shortening.
 */
import { Effect, Schema } from "effect"
import { Catalog } from "../catalog/catalog.ts"
import { shorten, toBase64Float32 } from "../embeddings/vectors.ts"
import { InvalidRequest, NotFound, PermissionDenied, shown } from "../errors.ts"
import { allowsModel } from "../keys/permissions.ts"
import { ModelCaller } from "../runtime/model-caller.ts"
import { readBody } from "./body.ts"
import { callFailureToApiError } from "./chat-answer.ts"
import { jsonResponse } from "./json.ts"
import { type RequestContext, requireKey, type RouteDef } from "./route.ts"
import type { RouteServices } from "./route-services.ts"
import { Telemetry } from "../observability/telemetry.ts"
import { startRequestSpan } from "../observability/tracing.ts"

const MAX_INPUTS = 2048
const NonEmptyText = Schema.String.check(Schema.isMinLength(1, { expected: "a non-empty string" }))

const EmbeddingsBody = Schema.Struct({
  model: Schema.String,
  input: Schema.Union([NonEmptyText, Schema.Array(NonEmptyText).check(Schema.isMinLength(1), Schema.isMaxLength(MAX_INPUTS))]),
  encoding_format: Schema.optional(Schema.Literals(["float", "base64"])),
  dimensions: Schema.optional(Schema.Int.check(Schema.isGreaterThanOrEqualTo(1))),
  user: Schema.optional(Schema.String)
})
const readEmbeddings = readBody(EmbeddingsBody)

const create = Effect.fnUntraced(function*(ctx: RequestContext) {
  const body = yield* readEmbeddings(ctx)
  const catalog = yield* Catalog
  const model = catalog.resolveEmbedding(body.model)
  ctx.record.modelAsked = body.model
  if (model === undefined) {
    return yield* new NotFound({ kind: "resource", message: `The embedding model '${shown(body.model)}' does not exist`, param: "model" })
  }
  if (!allowsModel((yield* requireKey(ctx)).permissions, model.id)) {
    return yield* new PermissionDenied({ message: `This key is not allowed to use the model ${model.id}` })
  }
  const dimensions = body.dimensions ?? model.dimensions
  if (dimensions !== model.dimensions && !model.flexibleDimensions) {
    return yield* new InvalidRequest({ message: `dimensions: ${model.id} only produces ${model.dimensions}-dimensional vectors`, param: "dimensions" })
  }
  if (dimensions > model.dimensions) {
    return yield* new InvalidRequest({ message: `dimensions: at most ${model.dimensions} for ${model.id}`, param: "dimensions" })
  }
  ctx.record.model = model.id
  const texts = typeof body.input === "string" ? [body.input] : body.input
  const key = yield* requireKey(ctx)
  const caller = yield* ModelCaller
  // Interruptible, like chat answers: a client that leaves gives its queue place back.
  const span = (yield* Telemetry).tracing ? yield* startRequestSpan(ctx.record, model.id) : undefined
  const embed = caller.embed(model, texts, { key, record: ctx.record })
  const result = yield* (span === undefined ? embed : Effect.withParentSpan(embed, span)).pipe(
    Effect.interruptible,
    Effect.catchTags({
      BackendError: (error) => Effect.fail(callFailureToApiError(error)),
      QueueTimeout: (error) => Effect.fail(callFailureToApiError(error))
    })
  )
  const base64 = body.encoding_format === "base64"
  const data = result.vectors.map((vector, index) => {
    const shaped = dimensions === model.dimensions ? vector : shorten(vector, dimensions)
    return { object: "embedding", index, embedding: base64 ? toBase64Float32(shaped) : shaped }
  })
  return jsonResponse(
    { object: "list", data, model: model.id, usage: { prompt_tokens: result.inputTokens, total_tokens: result.inputTokens } },
    { headers: { "xsvc-model": result.servedModel, ...result.headers } }
  )
})

export const embeddingsRoutes: ReadonlyArray<RouteDef<RouteServices>> = [
  { method: "POST", path: "/v1/embeddings", shape: "openai", auth: "bearer", surface: "embeddings", handler: create }
]
