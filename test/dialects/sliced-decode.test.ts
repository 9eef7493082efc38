/**
 * A large body's decode gives the event loop turns (`staged-decode.ts`: `Sliced`, `runDecode`):
 * a body at the value limit (~21,800 messages or input items) used to be decoded in one turn of
 * 4.5–8.8 ms on a slow VM. Its decode must come out the same as the same body's decode in one go,
 * and a refusal deep in the list must still name its field.
 */
import { describe, expect, it } from "vitest"
import { Effect, Exit } from "effect"
import { chatDialect } from "../../src/dialects/chat/index.ts"
import { messagesDialect } from "../../src/dialects/messages/index.ts"
import { responsesDialect } from "../../src/dialects/responses/index.ts"
import { runDecode } from "../../src/dialects/staged-decode.ts"
import type { Sliced } from "../../src/util/slices.ts"
import { InvalidRequest } from "../../src/errors.ts"
import { slicedJsonParser } from "../../src/util/sliced-json.ts"
import { SLICE_MS } from "../../src/util/slices.ts"
import { loopTurnsDuring } from "../support/loop-turns.ts"

const COUNT = 20_000

/** The body as the server has it when it came in large: parsed in slices (and so marked). */
const parsedInSlices = (body: unknown) =>
  Effect.runPromise(Effect.gen(function*() {
    const parser = slicedJsonParser()
    yield* parser.feed(new TextEncoder().encode(JSON.stringify(body)))
    return yield* parser.end()
  }))

const surfaces = [
  {
    name: "chat",
    decode: chatDialect.decode,
    body: (bad?: number) => ({
      model: "svc-x",
      messages: Array.from({ length: COUNT }, (_, i) => (i === bad ? { role: "user", content: 5 } : { role: i % 2 ? "assistant" : "user", content: `m${i}` }))
    })
  },
  {
    name: "messages",
    decode: messagesDialect.decode,
    body: (bad?: number) => ({
      model: "svc-x",
      max_tokens: 16,
      messages: Array.from({ length: COUNT }, (_, i) => (i === bad ? { role: "user", content: 5 } : { role: i % 2 ? "assistant" : "user", content: `m${i}` }))
    })
  },
  {
    name: "responses",
    decode: responsesDialect.decode,
    body: (bad?: number) => ({
      model: "svc-x",
      input: Array.from({ length: COUNT }, (_, i) => (i === bad ? { role: "user", content: 5 } : { role: i % 2 ? "assistant" : "user", content: `m${i}` }))
    })
  }
] as const

describe("a large body's decode", () => {
  for (const surface of surfaces) {
    it(`${surface.name}: decodes in slices what the same body decodes in one go`, async () => {
      const body = await parsedInSlices(surface.body())
      const value = await Effect.runPromise(surface.decode(body) as Effect.Effect<unknown, unknown>)
      // The same body not parsed in slices: decoded in this turn, pauses ignored.
      const whole = Effect.runSync(surface.decode(surface.body()) as Effect.Effect<unknown, unknown>)
      expect(value).toEqual(whole)
    })

    it(`${surface.name}: a bad item deep in the list is still the 400 naming it`, async () => {
      const body = await parsedInSlices(surface.body(COUNT - 3))
      const exit = await Effect.runPromiseExit(surface.decode(body) as Effect.Effect<unknown, { message: string }>)
      expect(Exit.isFailure(exit)).toBe(true)
      const error = Exit.isFailure(exit) ? JSON.stringify(exit.cause) : ""
      expect(error).toContain(`${surface.name === "responses" ? "input" : "messages"}[${COUNT - 3}]`)
    })
  }
})

describe("runDecode", () => {
  /** A decode of `steps` pieces of work, each busy for `ms`, pausing between them. */
  function* busy(steps: number, ms: number): Sliced<number> {
    for (let i = 0; i < steps; i++) {
      const until = performance.now() + ms
      while (performance.now() < until) {
        // the piece's work
      }
      if (i < steps - 1) yield
    }
    return steps
  }
  const isInvalid = (error: unknown): error is InvalidRequest => error instanceof InvalidRequest

  it("gives the event loop a turn at the pauses once a slice has run SLICE_MS, for a body parsed in slices", async () => {
    const large = await parsedInSlices({ model: "svc-x" })
    const { value, turns } = await loopTurnsDuring(() => Effect.runPromise(runDecode(large, () => busy(12, SLICE_MS / 2), isInvalid)))
    expect(value).toBe(12)
    // 12 pieces of SLICE_MS / 2 each: a turn at least every third piece, beside the two around the decode.
    expect(turns).toBeGreaterThanOrEqual(5)
  })

  it("ignores the pauses for a body parsed at once: one turn", async () => {
    const { value, turns } = await loopTurnsDuring(() => Effect.runPromise(runDecode({ model: "svc-x" }, () => busy(12, SLICE_MS / 2), isInvalid)))
    expect(value).toBe(12)
    expect(turns).toBeLessThanOrEqual(1)
  })

  it("fails with the decode's refusal and lets anything else be a defect", async () => {
    const large = await parsedInSlices({ model: "svc-x" })
    function* refusing(): Sliced<number> {
      yield
      throw new InvalidRequest({ message: "messages[3].content: Expected string" })
    }
    function* broken(): Sliced<number> {
      yield
      throw new TypeError("a bug")
    }
    const refused = await Effect.runPromiseExit(runDecode(large, refusing, isInvalid))
    expect(Exit.isFailure(refused) && JSON.stringify(refused.cause)).toContain("messages[3].content")
    const died = await Effect.runPromiseExit(runDecode(large, broken, isInvalid))
    expect(Exit.isFailure(died) && died.cause.reasons.some((reason) => reason._tag === "Die")).toBe(true)
  })
})
