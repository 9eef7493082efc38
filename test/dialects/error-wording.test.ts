/**
 * One 400 wording on every surface: the four dialects and the JSON routes map a bad field through
 * the same mapper (`src/util/schema-issue.ts`), so the same mistake reads the same everywhere.
 */
import { Effect, Schema } from "effect"
import { describe, expect, it } from "vitest"
import { chatDialect } from "../../src/dialects/chat/index.ts"
import { completionsDialect } from "../../src/dialects/completions/index.ts"
import type { ChatDialect } from "../../src/dialects/dialect.ts"
import { messagesDialect } from "../../src/dialects/messages/index.ts"
import { responsesDialect } from "../../src/dialects/responses/index.ts"
import { decodeWith } from "../../src/http/body.ts"

const valid: ReadonlyArray<readonly [string, ChatDialect<unknown>, Record<string, unknown>]> = [
  ["chat", chatDialect as ChatDialect<unknown>, { model: "m", messages: [{ role: "user", content: "hi" }] }],
  ["messages", messagesDialect as ChatDialect<unknown>, { model: "m", max_tokens: 8, messages: [{ role: "user", content: "hi" }] }],
  ["responses", responsesDialect as ChatDialect<unknown>, { model: "m", input: "hi" }],
  ["completions", completionsDialect as ChatDialect<unknown>, { model: "m", prompt: "hi" }]
]

const failure = (dialect: ChatDialect<unknown>, body: unknown) => Effect.runSync(Effect.flip(dialect.decode(body)))

describe("the 400 for a bad field reads the same on every surface", () => {
  it("a wrong type names the field and says what was expected, in the same words", () => {
    const errors = valid.map(([, dialect, body]) => failure(dialect, { ...body, temperature: "warm" }))
    for (const error of errors) {
      expect(error).toMatchObject({ _tag: "InvalidRequest", param: "temperature" })
      expect(error.message).toBe(errors[0].message)
    }
    expect(errors[0].message).toBe("temperature: Expected number | null | undefined")
  })

  it("a body that is not an object is 'Invalid request body: …' with no param, on every dialect and on a JSON route", () => {
    const route = decodeWith(Schema.Struct({ name: Schema.String }))
    const errors = [...valid.map(([, dialect]) => failure(dialect, [1, 2])), Effect.runSync(Effect.flip(route([1, 2])))]
    for (const error of errors) {
      expect(error._tag).toBe("InvalidRequest")
      expect("param" in error ? error.param : undefined).toBeUndefined()
      expect(error.message).toBe("Invalid request body: Expected object")
    }
  })

  it("a missing field reads the same in a dialect and on a JSON route", () => {
    const route = decodeWith(Schema.Struct({ model: Schema.String }))
    const fromRoute = Effect.runSync(Effect.flip(route({})))
    const fromDialects = valid.map(([, dialect, { model: _model, ...body }]) => failure(dialect, body))
    for (const error of [fromRoute, ...fromDialects]) {
      expect(error).toMatchObject({ param: "model", message: fromRoute.message })
    }
  })
})
