/**
 * A `store: true` answer whose save fails is reported as the storage's failure, never as the
 * model's, by the one rule of `storageFailureKind`: a value the store refuses (class 22) a 400
 * `InvalidRequest` naming `store`, one too large for it (class 54) a 413 naming `store`, anything
 * else (an outage, a full disk) a retryable 503 `ServiceUnavailable` (a stream's `api_error` event).
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Stream } from "effect"
import { SqlError } from "effect/sql"
import { responsesDialect } from "../../src/dialects/responses/index.ts"
import { callFailureToStreamFailure } from "../../src/http/chat-answer.ts"
import type { CanonicalRequest } from "../../src/model/request.ts"
import { responseEvents } from "../../src/model/events.ts"
import { makeUsage } from "../../src/model/usage.ts"
import { storeOnStop } from "../../src/stored-responses/stored-turn.ts"

const request: CanonicalRequest = {
  model: "svc-pico-1",
  system: [],
  messages: [{ role: "user", content: [{ type: "text", text: "hi" }] }],
  tools: [],
  toolChoice: { type: "auto" },
  stopSequences: [],
  reasoning: { enabled: false, visible: false },
  responseFormat: { type: "text" },
  stream: true,
  metadata: {}
}
const context = { id: "resp_test", model: "svc-pico-1", createdAt: 1767225600, request, echo: responsesDialect.defaultEcho(request) }
const events = Stream.fromIterable(responseEvents({ model: "svc-pico-1", content: [{ type: "text", text: "hello" }], stopReason: "end_turn", usage: makeUsage({}) }))
const plan = { conversation: { messages: [] } as never, previous: undefined, input: [], resolve: () => undefined }

const storedWith = (reason: SqlError.SqlError["reason"]) =>
  Stream.runDrain(storeOnStop(events, context, "key_test", plan, () => Effect.fail(new SqlError.SqlError({ reason })))).pipe(Effect.flip)

describe("storing a response fails", () => {
  it.effect("a storage outage: ServiceUnavailable 503 (retry after 1 s); a stream ends with api_error 503", () =>
    Effect.gen(function*() {
      const error = yield* storedWith(new SqlError.ConnectionError({ cause: new Error("connection refused") }))
      assert.strictEqual(error._tag, "ServiceUnavailable")
      assert.deepInclude(error, { status: 503, retryAfterSeconds: 1 })
      assert.deepStrictEqual(callFailureToStreamFailure(error), { status: 503, type: "api_error", message: error.message })
    }))

  it.effect("a value the store refuses (SQLSTATE class 22): InvalidRequest naming store; a stream ends with invalid_request_error 400", () =>
    Effect.gen(function*() {
      const refused = Object.assign(new Error("unsupported Unicode escape sequence"), { code: "22P05" })
      const error = yield* storedWith(new SqlError.UnknownError({ cause: refused }))
      assert.strictEqual(error._tag, "InvalidRequest")
      assert.strictEqual((error as { param?: string }).param, "store")
      assert.deepStrictEqual(callFailureToStreamFailure(error), { status: 400, type: "invalid_request_error", message: error.message })
    }))

  it.effect("a value too large for the store (class 54): PayloadTooLarge naming store; a stream ends with a 413", () =>
    Effect.gen(function*() {
      const tooLarge = Object.assign(new Error("total size of jsonb array elements exceeds the maximum"), { code: "54000" })
      const error = yield* storedWith(new SqlError.UnknownError({ cause: tooLarge }))
      assert.strictEqual(error._tag, "PayloadTooLarge")
      assert.strictEqual((error as { param?: string }).param, "store")
      assert.strictEqual(callFailureToStreamFailure(error).status, 413)
    }))

  it.effect("anything else is the store's fault, not the request's: a full disk, a clash of the ids the gateway mints — 503", () =>
    Effect.gen(function*() {
      const diskFull = Object.assign(new Error("could not extend file: No space left on device"), { code: "53100" })
      for (const reason of [
        new SqlError.UnknownError({ cause: diskFull }),
        new SqlError.UniqueViolation({ cause: new Error("duplicate key"), constraint: "stored_response_items_pkey" })
      ]) {
        const error = yield* storedWith(reason)
        assert.strictEqual(error._tag, "ServiceUnavailable")
        assert.strictEqual(callFailureToStreamFailure(error).type, "api_error")
      }
    }))
})
