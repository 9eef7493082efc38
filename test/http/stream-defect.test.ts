/**
 * A stream the platform sends (the embedding API's web handler, the keepalive path, the
 * standalone simulator: `frames` in chat-answer.ts) that a defect breaks mid-way ends with its
 * dialect's error event for an internal error, after what it sent — never a silent cut — and the
 * body still fails with the defect, so it is logged as one. (Over node:http, `writeSse` does the
 * same: node-sse.test.ts.)
 */
import { describe, expect, it } from "@effect/vitest"
import { Cause, Effect, Exit, Stream } from "effect"
import { chatDialect } from "../../src/dialects/chat/index.ts"
import { completionsDialect } from "../../src/dialects/completions/index.ts"
import type { ChatDialect } from "../../src/dialects/dialect.ts"
import { messagesDialect } from "../../src/dialects/messages/index.ts"
import { responsesDialect } from "../../src/dialects/responses/index.ts"
import { encodeDirect } from "../../src/http/chat-answer.ts"
import { userMessage } from "../../src/model/content.ts"
import type { CanonicalEvent } from "../../src/model/events.ts"
import { makeRequest } from "../../src/model/request.ts"

const dialects: ReadonlyArray<readonly [string, ChatDialect<unknown>, string]> = [
  ["chat", chatDialect as ChatDialect<unknown>, `"type":"api_error"`],
  ["completions", completionsDialect as ChatDialect<unknown>, `"type":"api_error"`],
  ["messages", messagesDialect as ChatDialect<unknown>, `"type":"api_error"`],
  ["responses", responsesDialect as ChatDialect<unknown>, `"code":"api_error"`]
]

const started: ReadonlyArray<CanonicalEvent> = [
  { type: "message_start", model: "svc-nova-mini" },
  { type: "block_start", index: 0, block: { type: "text" } },
  { type: "text_delta", index: 0, text: "sent before the bug" }
]

describe("a platform-sent stream broken by a defect", () => {
  for (const [name, dialect, errorType] of dialects) {
    it.effect(`ends with the ${name} dialect's error event after what it sent, and fails with the defect`, () =>
      Effect.gen(function*() {
        const request = makeRequest({ model: "svc-nova-mini", messages: [userMessage("hi")], stream: true })
        const context = { id: dialect.newId(), model: "svc-nova-mini", createdAt: 0, request, echo: dialect.defaultEcho(request) }
        const events = Stream.concat(Stream.fromArray(started), Stream.die(new RangeError("Maximum call stack size exceeded")))
        const response = yield* encodeDirect(dialect, context, events)
        expect(response.body._tag).toBe("Stream")
        if (response.body._tag !== "Stream") return
        const parts: Array<string> = []
        const decoder = new TextDecoder()
        const exit = yield* Effect.exit(Stream.runForEach(response.body.stream, (bytes) => Effect.sync(() => void parts.push(decoder.decode(bytes)))))
        const text = parts.join("")
        expect(text).toContain("sent before the bug")
        const last = text.trimEnd().split("\n\n").at(-1)!
        expect(last).toContain(errorType)
        expect(last).toContain("Internal error")
        expect(last).not.toContain("Maximum call stack")
        expect(Exit.isFailure(exit) && Cause.hasDies(exit.cause)).toBe(true)
      }))
  }
})
