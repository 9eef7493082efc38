/**
 * Executes one batch request as the interactive endpoint would answer it, non-streamed, through
 * the same `ModelCaller` (capacity queues, failover, metering against the key's allowance), at
 * batch priority. Whatever the line asks for, the outcome is a result line, never a failure of the
 * batch: an unknown model, a permission or capability problem, a spent allowance become that
 * line's error in the surface's error shape. Waiting conditions — a rate limit, the queue's
 * maximum wait, a brief outage — put the request back for later instead (`Requeue`).
 */
import { Clock, Effect, type Scope } from "effect"
import { Catalog } from "../catalog/catalog.ts"
import { prepareRequest } from "../catalog/requirements.ts"
import { chatDialect } from "../dialects/chat/index.ts"
import { completionsDialect } from "../dialects/completions/index.ts"
import type { ChatDialect } from "../dialects/dialect.ts"
import { messagesDialect } from "../dialects/messages/index.ts"
import { responsesDialect } from "../dialects/responses/index.ts"
import { shorten, toBase64Float32 } from "../embeddings/vectors.ts"
import { type ApiError, InvalidRequest, NotFound, PermissionDenied, shown } from "../errors.ts"
import { callFailureToApiError } from "../http/chat-answer.ts"
import { errorBody } from "../http/render-error.ts"
import type { KeyRecord } from "../keys/keys-repo.ts"
import { allowsModel } from "../keys/permissions.ts"
import { ModelCaller } from "../runtime/model-caller.ts"
import type { BatchClaim, RequestOutcome } from "./batches-repo.ts"
import { isPlainObject } from "../util/json.ts"
import { parseStoredInSlices } from "../util/sliced-json.ts"

type Answer = { readonly status: number; readonly body: unknown } | ApiError

const REQUEUE_MS = 1_000

/** The endpoints an OpenAI batch line may name, and the dialect each answers in. */
const openaiDialects: Record<string, ChatDialect<any>> = {
  "/v1/chat/completions": chatDialect,
  "/v1/completions": completionsDialect,
  "/v1/responses": responsesDialect
}

export const OPENAI_BATCH_ENDPOINTS = ["/v1/chat/completions", "/v1/responses", "/v1/embeddings", "/v1/completions"] as const


const chatAnswer = Effect.fnUntraced(function*<Echo>(dialect: ChatDialect<Echo>, body: unknown, key: KeyRecord, requestId: string) {
  if (isPlainObject(body) && body.stream === true) {
    return yield* new InvalidRequest({ message: "stream: batch requests are answered whole; stream must be false or absent", param: "stream" })
  }
  if (dialect === responsesDialect && isPlainObject(body) && body.previous_response_id != null) {
    return yield* new InvalidRequest({ message: "previous_response_id: batch requests cannot continue a stored response", param: "previous_response_id" })
  }
  const decoded = yield* dialect.decode(body)
  const catalog = yield* Catalog
  const model = catalog.resolveChat(decoded.request.model)
  if (model === undefined) return yield* new NotFound({ kind: "resource", message: `The model '${shown(decoded.request.model)}' does not exist`, param: "model" })
  if (!allowsModel(key.permissions, model.id)) return yield* new PermissionDenied({ message: `This key is not allowed to use the model ${model.id}` })
  const request = yield* prepareRequest(model, { ...decoded.request, stream: false }, { viaHandle: catalog.isCompatibilityHandle(decoded.request.model) })
  const call = yield* (yield* ModelCaller).complete(request, { key, requestId, priority: "batch" }).pipe(
    Effect.catchTags({ BackendError: (e) => Effect.fail(callFailureToApiError(e)), QueueTimeout: (e) => Effect.fail(callFailureToApiError(e)) })
  )
  const createdAt = Math.floor((yield* Clock.currentTimeMillis) / 1000)
  // Batch answers are not stored (no `previous_response_id` can name them): `store` reads false.
  const echo = dialect === responsesDialect ? { ...(decoded.echo as object), store: false } as Echo : decoded.echo
  const context = { id: dialect.newId(), model: call.servedModel, createdAt, request, echo }
  return { status: 200, body: dialect.encodeResponse(call.response, context) }
})

const embeddingAnswer = Effect.fnUntraced(function*(body: unknown, key: KeyRecord, requestId: string) {
  if (!isPlainObject(body) || typeof body.model !== "string") return yield* new InvalidRequest({ message: "model: expected a string", param: "model" })
  const input = body.input
  const texts = typeof input === "string" ? [input] : input
  if (!Array.isArray(texts) || texts.length === 0 || texts.some((t) => typeof t !== "string" || t === "")) {
    return yield* new InvalidRequest({ message: "input: expected a non-empty string or array of non-empty strings", param: "input" })
  }
  const model = (yield* Catalog).resolveEmbedding(body.model)
  if (model === undefined) return yield* new NotFound({ kind: "resource", message: `The embedding model '${shown(body.model)}' does not exist`, param: "model" })
  if (!allowsModel(key.permissions, model.id)) return yield* new PermissionDenied({ message: `This key is not allowed to use the model ${model.id}` })
  const dimensions = typeof body.dimensions === "number" ? body.dimensions : model.dimensions
  if (!Number.isInteger(dimensions) || dimensions < 1 || dimensions > model.dimensions || (dimensions !== model.dimensions && !model.flexibleDimensions)) {
    return yield* new InvalidRequest({ message: `dimensions: ${model.id} produces ${model.dimensions}-dimensional vectors`, param: "dimensions" })
  }
  const result = yield* (yield* ModelCaller).embed(model, texts as ReadonlyArray<string>, { key, requestId, priority: "batch" }).pipe(
    Effect.catchTags({ BackendError: (e) => Effect.fail(callFailureToApiError(e)), QueueTimeout: (e) => Effect.fail(callFailureToApiError(e)) })
  )
  const base64 = body.encoding_format === "base64"
  const data = result.vectors.map((vector, index) => {
    const shaped = dimensions === model.dimensions ? vector : shorten(vector, dimensions)
    return { object: "embedding", index, embedding: base64 ? toBase64Float32(shaped) : shaped }
  })
  return { status: 200, body: { object: "list", data, model: model.id, usage: { prompt_tokens: result.inputTokens, total_tokens: result.inputTokens } } }
})

/** Whether an error means "not now" rather than "not this request". */
const requeueAfter = (error: ApiError): number | undefined => {
  if (error._tag === "LimitExceeded" && error.kind === "rate_limit_error") return Math.max(REQUEUE_MS, (error.retryAfterSeconds ?? 1) * 1000)
  // 503s are a queue's maximum wait or a brief outage; 502 (the model failed after every retry) is the line's error.
  if (error._tag === "ServiceUnavailable" && error.status === 503) return REQUEUE_MS
  return undefined
}

const answer = (claim: BatchClaim, body: unknown, key: KeyRecord, requestId: string): Effect.Effect<Answer, never, ModelCaller | Catalog | Scope.Scope> => {
  const run = claim.kind === "messages"
    ? chatAnswer(messagesDialect, body, key, requestId)
    : claim.endpoint === "/v1/embeddings"
    ? embeddingAnswer(body, key, requestId)
    : chatAnswer(openaiDialects[claim.endpoint], body, key, requestId)
  return run.pipe(Effect.catch((error: ApiError) => Effect.succeed(error)))
}

const isAnswered = (a: Answer): a is { status: number; body: unknown } => !("_tag" in a)

/** The request's outcome as the batch records it (the result line's `result` or `response`). */
export const executeRequest = Effect.fnUntraced(function*(claim: BatchClaim, key: KeyRecord | undefined): Effect.fn.Return<RequestOutcome, never, ModelCaller | Catalog | Scope.Scope> {
  const requestId = `batchreq_${claim.batchId}_${claim.idx}`
  const shape = claim.kind === "messages" ? "messages" : "openai"
  // A large request's params are parsed in slices (a request may be 16 MiB).
  const params = yield* parseStoredInSlices(claim.params)
  const a: Answer = key === undefined || key.revokedAt !== null
    ? new PermissionDenied({ message: "The key that created this batch was revoked" })
    : yield* answer(claim, params, key, requestId)
  if (isAnswered(a)) {
    const result = claim.kind === "messages"
      ? { type: "succeeded", message: a.body }
      : { status_code: a.status, request_id: requestId, body: a.body }
    return { _tag: "Ended", state: "succeeded", result: JSON.stringify(result) } satisfies RequestOutcome
  }
  const error = a as ApiError
  const after = requeueAfter(error)
  if (after !== undefined) return { _tag: "Requeue", afterMs: after } satisfies RequestOutcome
  const rendered = errorBody(error, shape, requestId)
  const result = claim.kind === "messages"
    ? { type: "errored", error: rendered.body }
    : { status_code: rendered.status, request_id: requestId, body: rendered.body }
  return { _tag: "Ended", state: "errored", result: JSON.stringify(result) } satisfies RequestOutcome
})
