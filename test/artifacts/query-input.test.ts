/** The query body's checks: each bad input is refused naming its field; good ones are normalized. */
import { describe, expect, it } from "vitest"
import { checkQuery, readVersion } from "../../src/artifacts/query-input.ts"

const table = { structured: true, columns: [{ name: "price", type: "number" as const }, { name: "zip", type: "string" as const }] }
const text = { structured: false, columns: [] }

describe("query input", () => {
  it.each([
    [{ filter: { field: "a", op: "eq", value: 1 } }, "filter", "expected an array"],
    [{ filter: [{ field: 3, op: "eq", value: 1 }] }, "filter[0].field", "expected a field name (a string), got a number"],
    [{ filter: [{ field: "a", op: "eq", value: 1 }, { field: ["a"], op: "eq", value: 1 }] }, "filter[1].field", "got an array"],
    [{ filter: [{ field: "a", op: "like", value: 1 }] }, "filter[0].op", "expected one of eq, ne, lt, lte, gt, gte, contains, in, exists"],
    [{ filter: [{ field: "a", op: "in", value: 1 }] }, "filter[0].value", "in takes an array"],
    [{ filter: [{ field: "a", op: "lt", value: true }] }, "filter[0].value", "compares with a number or a string"],
    [{ filter: [{ field: "a", op: "exists", value: "yes" }] }, "filter[0].value", "exists takes true or false"],
    [{ filter: [{ field: "a", op: "eq" }] }, "filter[0].value", "eq needs a value"],
    [{ filter: ["a"] }, "filter[0]", "expected an object"],
    [{ sort: [{ field: "a", dir: "up" }] }, "sort[0].dir", `expected "asc" or "desc"`],
    [{ sort: [{ dir: "asc" }] }, "sort[0].field", "expected a field name"],
    [{ select: "a" }, "select", "expected an array of field names"],
    [{ select: ["a", 1] }, "select[1]", "expected a field name"],
    [{ search: 5 }, "search", "expected a string"],
    [{ offset: -1 }, "offset", "expected a non-negative integer, got -1"],
    [{ offset: 1.5 }, "offset", "got 1.5"],
    [{ limit: 1001 }, "limit", "at most 1000"],
    [{ limit: "10" }, "limit", "expected a non-negative integer, got a string"],
    [{ range: { rowStart: -3 } }, "range.rowStart", "non-negative integer"],
    [{ range: { rowStart: 5, rowEnd: 2 } }, "range.rowEnd", "must not be below range.rowStart"],
    [{ range: { byteStart: 0 } }, "range.byteStart", "byte ranges apply to unstructured text"],
    [{ range: 3 }, "range", "expected an object"],
    [{ original: "yes" }, "original", "expected true or false"],
    [{ filter: [{ field: "a\u0000", op: "eq", value: 1 }] }, "filter[0].field", "U+0000"],
    [{ filter: [{ field: "a", op: "eq", value: { k: ["\ud800"] } }] }, "filter[0].value", "unpaired surrogate"],
    [{ filter: [{ field: "a", op: "in", value: ["x\u0000"] }] }, "filter[0].value", "U+0000"],
    [{ search: "\u0000" }, "search", "U+0000"],
    [{ sort: [{ field: "\udc00" }] }, "sort[0].field", "unpaired surrogate"]
  ])("refuses %j naming %s", (body, param, message) => {
    const result = checkQuery(body, table)
    expect(result.ok).toBe(false)
    if (result.ok) return
    expect(result.param).toBe(param)
    expect(result.message).toContain(`${param}: `)
    expect(result.message).toContain(message)
  })

  it.each([
    [{ filter: [] }, "filter"],
    [{ limit: 5 }, "limit"],
    [{ range: { rowStart: 1 } }, "range.rowStart"],
    [{ range: { byteStart: 5, byteEnd: 2 } }, "range.byteEnd"],
    [{ range: { byteStart: 1.5 } }, "range.byteStart"]
  ])("on text, refuses %j naming %s", (body, param) => {
    const result = checkQuery(body, text)
    expect(result.ok ? undefined : result.param).toBe(param)
  })

  it("refuses a deeply nested value without overflowing the stack", () => {
    const deep = JSON.parse("[".repeat(20_000) + "]".repeat(20_000))
    expect(checkQuery({ filter: [{ field: "a", op: "eq", value: deep }] }, table)).toMatchObject({ ok: false, param: "filter[0].value" })
    expect(checkQuery({ filter: [{ field: "a", op: "eq", value: [[[1]]] }] }, table).ok).toBe(true)
  })

  it("checks the version before the artifact is read", () => {
    expect(readVersion({ version: 0 })).toMatchObject({ ok: false, param: "version" })
    expect(readVersion({ version: "2" })).toMatchObject({ ok: false, param: "version" })
    expect(readVersion({ version: 2 })).toEqual({ ok: true, value: 2 })
    expect(readVersion(undefined)).toEqual({ ok: true, value: undefined })
  })

  it("normalizes: defaults, lowercased search, deduplicated select, values in the column's type", () => {
    const result = checkQuery({
      filter: [{ field: "price", op: "gt", value: "9" }, { field: "zip", op: "eq", value: 2134 }, { field: "price", op: "in", value: ["1", 2, "x"] }, { field: "other", op: "exists" }],
      search: "ÄBC",
      select: ["a", "b", "a"]
    }, table)
    expect(result).toEqual({
      ok: true,
      value: {
        kind: "rows",
        filter: [
          { field: "price", op: "gt", value: 9 },
          { field: "zip", op: "eq", value: "2134" },
          { field: "price", op: "in", value: [1, 2, "x"] },
          { field: "other", op: "exists", value: true }
        ],
        sort: [],
        search: "äbc",
        select: ["a", "b"],
        offset: 0,
        limit: 100,
        rowStart: undefined,
        rowEnd: undefined,
        original: false
      }
    })
    const flags = { structured: true, columns: [{ name: "on", type: "boolean" as const }] }
    expect(checkQuery({ filter: [{ field: "on", op: "gt", value: "true" }] }, flags)).toMatchObject({ ok: true, value: { filter: [{ value: "true" }] } })
    expect(checkQuery({ filter: [{ field: "on", op: "eq", value: "true" }] }, flags)).toMatchObject({ ok: true, value: { filter: [{ value: true }] } })
    expect(checkQuery(undefined, text)).toEqual({ ok: true, value: { kind: "text", byteStart: 0, byteEnd: undefined } })
  })
})
