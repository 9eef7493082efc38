/**
 * The sliced parser of large bodies (`src/util/sliced-json.ts`): the same value as `JSON.parse`
 * whatever the chunking, the same depth 400 as `requireShallow`, a 400 naming the field beyond
 * the value limit, and yields to the event loop while it works.
 */
import { Effect } from "effect"
import fc from "fast-check"
import { describe, expect, it } from "vitest"
import { InvalidRequest } from "../../src/errors.ts"
import { MAX_JSON_DEPTH, MAX_JSON_KEY_CHARS, MAX_JSON_VALUES, requireShallow } from "../../src/util/json-limits.ts"
import { parseJsonTextInSteps, slicedJsonParser, type SlicedJsonLimits } from "../../src/util/sliced-json.ts"
import { loopTurnsDuring } from "../support/loop-turns.ts"

/** Parses `text` fed in chunks of `chunk` bytes; the value, or the 400. */
const parse = (text: string, chunk = 7, limits?: SlicedJsonLimits) =>
  Effect.runPromise(
    Effect.gen(function*() {
      const parser = slicedJsonParser(limits)
      const bytes = Buffer.from(text)
      for (let at = 0; at < bytes.length; at += chunk) yield* parser.feed(bytes.subarray(at, at + chunk))
      return yield* parser.end()
    }).pipe(Effect.flip, Effect.map((error) => ({ error })), Effect.catch((value) => Effect.succeed({ value })))
  )

/** The value of `parse`, failing the test on a 400. */
const valueOf = async (text: string, chunk?: number) => {
  const outcome = await parse(text, chunk)
  if ("error" in outcome) throw new Error(`refused: ${outcome.error.message}`)
  return outcome.value
}

/** The 400 of `parse`, failing the test on a value. */
const errorOf = async (text: string, chunk?: number, limits?: SlicedJsonLimits) => {
  const outcome = await parse(text, chunk, limits)
  if (!("error" in outcome)) throw new Error(`accepted: ${JSON.stringify(outcome.value)}`)
  expect(outcome.error).toBeInstanceOf(InvalidRequest)
  return outcome.error
}

describe("slicedJsonParser", () => {
  it("builds what JSON.parse builds, however the bytes are cut", async () => {
    await fc.assert(
      fc.asyncProperty(fc.jsonValue(), fc.integer({ min: 1, max: 64 }), async (value, chunk) => {
        const text = JSON.stringify(value, null, chunk % 3 === 0 ? 2 : undefined)
        expect(await valueOf(text, chunk)).toEqual(JSON.parse(text))
      }),
      { numRuns: 300 }
    )
  })

  it("keeps escapes, characters cut between chunks, __proto__ keys and the last duplicate key", async () => {
    const text = `{"s":"é😀\\u00e9\\ud83d\\ude00\\n\\"","__proto__":{"x":1},"d":1,"d":2,"n":-1.5e3}`
    for (const chunk of [1, 2, 3, 5]) {
      const value = (await valueOf(text, chunk)) as Record<string, unknown>
      expect(value).toEqual(JSON.parse(text))
      expect(Object.getPrototypeOf(value)).toBe(Object.prototype)
      expect(Object.hasOwn(value, "__proto__")).toBe(true)
    }
  })

  it("reads a body of whitespace as empty, and a lone number", async () => {
    expect(await valueOf(" \n\t ")).toBeUndefined()
    expect(await valueOf("")).toBeUndefined()
    expect(await valueOf(" 12.5 ")).toBe(12.5)
  })

  it("refuses malformed JSON with a 400, wherever it is cut", async () => {
    for (const text of [`{"a":1`, `{"a":1} x`, `[1,2,]`, `{"a" 1}`, `"open`, `{"a":1}{"b":2}`, `nul`, `{'a':1}`]) {
      const error = await errorOf(text, 3)
      expect(error.message).toMatch(/^Malformed JSON in the request body: /)
      expect(error.param).toBeUndefined()
    }
  })

  it("refuses one level past the depth limit with requireShallow's own 400", async () => {
    const nested = (levels: number) => `{"messages":[{"content":` + "[".repeat(levels - 3) + "]".repeat(levels - 3) + `}]}`
    expect(await valueOf(nested(MAX_JSON_DEPTH))).toBeDefined()
    const deep = nested(MAX_JSON_DEPTH + 1)
    const error = await errorOf(deep, 16)
    const expected = await Effect.runPromise(Effect.flip(requireShallow(JSON.parse(deep))))
    expect(error.message).toBe(expected.message)
    expect(error.param).toBe("messages")
    // A million levels: refused at the limit, never built.
    expect((await errorOf("[".repeat(1_000_000), 65_536)).message).toMatch(/^The request body is nested deeper than the limit of 128 levels/)
  })

  it("refuses more values than the limit, naming the top-level field that crossed it", async () => {
    const body = (messages: number) =>
      JSON.stringify({ model: "m", messages: Array.from({ length: messages }, () => ({ role: "user", content: "a" })) })
    // model + its string, the body, the list, and three values per message.
    expect(await valueOf(body(10), 64)).toBeDefined()
    const error = await errorOf(body(11), 64, { maxValues: 1 + 1 + 1 + 30 })
    expect(error.param).toBe("messages")
    expect(error.message).toMatch(/^messages: more than 33 JSON values in the request body/)
    expect((await errorOf(`[` + "0,".repeat(40) + `0]`, 64, { maxValues: 40 })).param).toBeUndefined()
    // The default limit, on the shape of the hostile body: a million tiny messages.
    const many = `{"model":"m","messages":[` + Array(MAX_JSON_VALUES).fill(`{"role":"user","content":"a"}`).join(",") + `]}`
    expect((await errorOf(many, 65_536)).param).toBe("messages")
  })

  it("refuses a key longer than the limit before setting it, naming where it is; takes one at the limit", async () => {
    const at = "k".repeat(MAX_JSON_KEY_CHARS)
    const over = at + "k"
    expect(await valueOf(JSON.stringify({ model: "m", metadata: { [at]: 1 } }), 4096)).toEqual({ model: "m", metadata: { [at]: 1 } })
    const nested = await errorOf(JSON.stringify({ model: "m", tools: [{ input_schema: { properties: { [over]: {} } } }] }), 4096)
    expect(nested.param).toBe("tools")
    expect(nested.message).toBe(`tools: an object key longer than the limit of ${MAX_JSON_KEY_CHARS} characters (in tools[0].input_schema.properties)`)
    const top = await errorOf(`{"${over}":1}`, 4096)
    expect(top.param).toBeUndefined()
    expect(top.message).toBe(`The request body has an object key longer than the limit of ${MAX_JSON_KEY_CHARS} characters`)
    // A value that long is no key: only the limits on the body's size and the store's apply.
    expect(await valueOf(JSON.stringify({ [at.slice(1)]: over }), 4096)).toEqual({ [at.slice(1)]: over })
    // Without a limit (a stored document the gateway wrote), any key.
    expect(await parse(`{"${over}":1}`, 4096, { maxKeyChars: Number.POSITIVE_INFINITY })).toEqual({ value: { [over]: 1 } })
  })

  it("lets the event loop run while it parses a large body", async () => {
    const big = JSON.stringify({ input: "x".repeat(8 << 20), items: Array.from({ length: 20_000 }, (_, i) => ({ i })) })
    const { value, turns } = await loopTurnsDuring(() => valueOf(big, 1 << 20))
    expect(value).toEqual(JSON.parse(big))
    expect(turns).toBeGreaterThan(1)
  })
})

/** Runs `parseJsonTextInSteps` to its end; its result and how many steps it paused at. */
const inSteps = (text: string) => {
  const steps = parseJsonTextInSteps(text, "messages[1].tool_calls[0].function.arguments")
  let pauses = 0
  for (;;) {
    const next = steps.next()
    if (next.done === true) return { parsed: next.value, pauses }
    pauses++
  }
}

describe("parseJsonTextInSteps (a tool call's arguments inside a request)", () => {
  it("gives JSON.parse's value, a long text a slice per step", async () => {
    await fc.assert(
      fc.property(fc.jsonValue(), (inner) => {
        // Slice boundaries fall inside escapes, surrogate pairs and numbers.
        const text = JSON.stringify({ inner, long: "é😀\"\\\n".repeat(20_000), n: [1.5e300, -0, 12345678901234567890], ["__proto__"]: { x: 1 } })
        const { parsed, pauses } = inSteps(text)
        expect(parsed).toEqual({ value: JSON.parse(text) })
        expect(pauses).toBeGreaterThan(1)
      }),
      { numRuns: 15 }
    )
  })

  it("says a text that is not JSON is not, long or short, and parses a short one at once", () => {
    expect(inSteps("{\"city\":\"Ro").parsed).toBeUndefined()
    expect(inSteps(`{"a":"${"x".repeat(200_000)}`).parsed).toBeUndefined()
    expect(inSteps(`{"a":1} trailing ${"x".repeat(200_000)}`).parsed).toBeUndefined()
    expect(inSteps(" ".repeat(100_000)).parsed).toBeUndefined()
    expect(inSteps("{\"city\":\"Paris\"}")).toEqual({ parsed: { value: { city: "Paris" } }, pauses: 0 })
  })

  it("refuses a value nested deeper than a body may be, naming the field, short or long, and stops reading a long one there", () => {
    for (const text of ["[".repeat(129) + "]".repeat(129), "[".repeat(200_000) + "]".repeat(200_000)]) {
      const steps = parseJsonTextInSteps(text, "input[3].arguments")
      let pauses = 0
      const refused = (() => {
        try {
          while (steps.next().done !== true) pauses++
        } catch (error) {
          return error as { message: string; param: string }
        }
        return undefined
      })()
      expect(refused).toMatchObject({ param: "input[3].arguments", message: "input[3].arguments: nested deeper than the limit of 128 levels" })
      // The long one is refused in its first step, not after reading 400,000 characters.
      expect(pauses).toBe(0)
    }
    expect(inSteps("[".repeat(128) + "]".repeat(128)).parsed).toEqual({ value: JSON.parse("[".repeat(128) + "]".repeat(128)) })
  })

  it("refuses a key longer than a body's may be, naming the field", () => {
    const steps = parseJsonTextInSteps(`{"${"k".repeat(MAX_JSON_KEY_CHARS + 1)}":1}`, "input[3].arguments")
    expect(() => {
      while (steps.next().done !== true) { /* to the refusal */ }
    }).toThrow(expect.objectContaining({ param: "input[3].arguments", message: `input[3].arguments: an object key longer than the limit of ${MAX_JSON_KEY_CHARS} characters` }))
  })
})
