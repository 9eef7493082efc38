/**
 * A `store: true` answer whose save fails is reported as the storage's failure, never as the
 * model's: an outage is a retryable 503 `ServiceUnavailable` (a stream's `api_error` event), any
 * other refusal a 400 `InvalidRequest` naming `store`.
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

  it.effect("a write the store refuses: InvalidRequest naming store; a stream ends with invalid_request_error 400", () =>
    Effect.gen(function*() {
      const error = yield* storedWith(new SqlError.UniqueViolation({ cause: new Error("duplicate key"), constraint: "response_items_pkey" }))
      assert.strictEqual(error._tag, "InvalidRequest")
      assert.strictEqual((error as { param?: string }).param, "store")
      assert.strictEqual(callFailureToStreamFailure(error).type, "invalid_request_error")
    }))
})
