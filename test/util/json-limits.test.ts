/** The depth and storability checks on parsed bodies (`src/util/json-limits.ts`). */
import { describe, expect, it } from "vitest"
import { findTooDeep, findUnstorable, MAX_JSON_DEPTH } from "../../src/util/json-limits.ts"

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
