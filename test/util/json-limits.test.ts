/** The depth and storability checks on parsed bodies (`src/util/json-limits.ts`). */
import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import { findTooDeep, findUnstorable, findUnstorableInSlices, holdsMoreValues, MAX_JSON_DEPTH, MAX_STORED_JSON_BYTES } from "../../src/util/json-limits.ts"
import { STRING_SLICE } from "../../src/util/slices.ts"
import { loopTurnsDuring } from "../support/loop-turns.ts"

const nested = (depth: number): unknown => JSON.parse(`{"a":`.repeat(depth - 1) + "{}" + "}".repeat(depth - 1))

describe("findTooDeep", () => {
  it("accepts the limit, refuses one level more, and names the path", () => {
    expect(findTooDeep(nested(MAX_JSON_DEPTH))).toBeUndefined()
    const problem = findTooDeep({ x: [1, nested(MAX_JSON_DEPTH)] })
    expect(problem).toMatchObject({ kind: "depth" })
    expect(problem?.kind === "depth" && problem.path.slice(0, 3)).toEqual(["x", 1, "a"])
  })

  it("walks a million levels without a stack overflow", () => {
    const deep = JSON.parse("[".repeat(1_000_000) + "]".repeat(1_000_000))
    expect(findTooDeep(deep)?.kind).toBe("depth")
    expect(findUnstorable(deep, 64)?.kind).toBe("size")
  })
})

describe("findUnstorable", () => {
  it("finds NUL and unpaired surrogates in values and keys, with their path", () => {
    expect(findUnstorable({ a: ["ok", "x\u0000"] })).toEqual({ kind: "nul", path: ["a", 1] })
    expect(findUnstorable({ a: { "\ud800": 1 } })).toEqual({ kind: "surrogate", path: ["a", "\ud800"] })
    expect(findUnstorable("\udc00 trailing")).toEqual({ kind: "surrogate", path: [] })
    expect(findUnstorable({ emoji: "😀 and é", nested: [{ n: -1.5e-7 }, null, true] })).toBeUndefined()
  })

  it("refuses numbers JSON cannot carry", () => {
    expect(findUnstorable({ n: Infinity })).toEqual({ kind: "number", path: ["n"] })
    expect(findUnstorable([Number.NaN])).toEqual({ kind: "number", path: [0] })
  })

  it("measures the printed size: escapes count, numbers print in full", () => {
    expect(findUnstorable("x".repeat(98), 100)).toBeUndefined()
    expect(findUnstorable("x".repeat(99), 100)).toEqual({ kind: "size", bytes: 101 })
    expect(findUnstorable("\n".repeat(50), 100)).toMatchObject({ kind: "size" }) // 100 bytes escaped + quotes
    expect(findUnstorable("x".repeat(50), 100)).toBeUndefined()
    expect(findUnstorable("é".repeat(49), 100)).toBeUndefined() // 98 UTF-8 bytes + quotes
    expect(findUnstorable(1e300, 300)).toMatchObject({ kind: "size" }) // jsonb prints 301 digits
    expect(findUnstorable(1e20, 300)).toBeUndefined()
  })
})

describe("findUnstorableInSlices (large values)", () => {
  const inSlices = (value: unknown, maxBytes?: number) => Effect.runPromise(findUnstorableInSlices(value, maxBytes))
  // A pair that straddles a slice's end: split, each half would be a lone surrogate.
  const straddling = "x".repeat(STRING_SLICE - 1) + "😀" + "é\n\"".repeat(1_000)

  it("checks a long string slice by slice as the whole: pairs kept, escapes and sizes added up", async () => {
    const printed = Buffer.byteLength(JSON.stringify(straddling))
    expect(await inSlices(straddling, printed)).toBeUndefined()
    expect(await inSlices(straddling, printed - 1)).toEqual({ kind: "size", bytes: printed })
    expect(await inSlices({ [straddling]: [straddling] }, 3 * printed)).toBeUndefined()
    expect(await inSlices({ a: [1, straddling + "\ud800"] })).toEqual({ kind: "surrogate", path: ["a", 1] })
    expect(await inSlices({ a: { [straddling + "\u0000"]: 1 } })).toEqual({ kind: "nul", path: ["a", straddling + "\u0000"] })
    expect(findUnstorable({ a: [1, straddling + "\ud800"] })).toEqual({ kind: "surrogate", path: ["a", 1] })
  })

  it("bounds a large document's printed size as a small one's, and refuses one a byte over", async () => {
    // 2,000 keys of ~8 KiB each. jsonb prints `"key": value` joined by ", ": one more byte per key
    // and per comma than JSON.stringify; the bound counts ", " after the last entry too.
    const value = Object.fromEntries(Array.from({ length: 2_000 }, (_, i) => [`k${i}`, `v${i} é ${"y".repeat(8_000)}`]))
    const printed = Buffer.byteLength(JSON.stringify(value)) + 2 * 2_000 + 1
    expect(await inSlices(value, printed)).toBeUndefined()
    expect(await inSlices(value, printed - 1)).toMatchObject({ kind: "size" })
  })

  it("gives the event loop back while it checks 16 MiB", async () => {
    const value = Array.from({ length: 16_000 }, (_, i) => `${i} é 😀 ${"z".repeat(1_000)}`)
    // One string of 15 MiB (two bytes per character in V8, three in UTF-8).
    const big = { one: "€".repeat(5 * 1024 * 1024) }
    const { value: problem, turns } = await loopTurnsDuring(() => inSlices(value))
    expect(problem).toBeUndefined()
    expect(turns).toBeGreaterThan(3)
    const single = await loopTurnsDuring(() => inSlices(big))
    expect(single.value).toBeUndefined()
    expect(single.turns).toBeGreaterThan(3)
    expect(await inSlices([big.one, big.one], MAX_STORED_JSON_BYTES)).toMatchObject({ kind: "size" })
  })
})

describe("holdsMoreValues (a long streamed event, before it is parsed)", () => {
  const MIB = 1 << 20
  it("counts containers and commas outside strings, and only in a long text", () => {
    const many = `[${new Array(70_000).fill("0".repeat(16)).join(",")}]`
    expect(many.length).toBeGreaterThan(MIB)
    expect(holdsMoreValues(many, 65_536)).toBe(true)
    expect(holdsMoreValues(many, 70_001)).toBe(false)
    // The same commas inside a string (escaped quotes and backslashes included) are one value.
    const text = JSON.stringify({ content: `a\\"b,${",{[".repeat(MIB / 2)}\\` })
    expect(holdsMoreValues(text, 65_536)).toBe(false)
    expect(JSON.parse(text).content.length).toBeGreaterThan(MIB)
    // A short text is not scanned (its parse is milliseconds).
    expect(holdsMoreValues(`[${new Array(100_000).fill("0").join(",")}]`, 65_536)).toBe(false)
  })
})
