/**
 * The query compiler alone (no database): every op and value type compiles to SQL whose text holds
 * none of the input — names, values, windows and search text are all bound parameters — and the
 * statement shapes follow the column types. What the SQL *returns* is checked against the plain
 * TypeScript evaluator in query-property.test.ts, on both engines.
 */
import { describe, expect, it } from "vitest"
import type { Column } from "../../src/artifacts/model.ts"
import { compileRowQuery, compileTextQuery, trimToCharacters } from "../../src/artifacts/query-compiler.ts"
import { checkQuery, type RowQuery } from "../../src/artifacts/query-input.ts"
import { keyColumns, keysLines, MAX_KEY_COLUMNS } from "../../src/artifacts/row-keys.ts"

const columns: ReadonlyArray<Column> = [
  { name: "n", type: "number" },
  { name: "s", type: "string" },
  { name: "b", type: "boolean" },
  { name: "m", type: "mixed" },
  { name: "z", type: "null" }
]
/** A content without row keys (stored before migration 0010): every query reads the documents. */
const target = { contentId: "42", rowCount: 1000, columns, allColumnsListed: true, keyColumns: undefined }
/** The same content with row keys: column `n` is key 1. */
const keyed = { ...target, keyColumns: keyColumns(columns) }

const rowQuery = (body: unknown): RowQuery => {
  const checked = checkQuery(body, { structured: true, columns })
  if (!checked.ok) throw new Error(checked.message)
  if (checked.value.kind !== "rows") throw new Error("expected a row query")
  return checked.value
}

/** Placeholders used in the text must be exactly $1..$n, each bound. */
const expectBound = (statement: { text: string; params: ReadonlyArray<unknown> }) => {
  const used = new Set([...statement.text.matchAll(/\$(\d+)/g)].map((m) => Number(m[1])))
  expect([...used].sort((a, b) => a - b)).toEqual(statement.params.map((_, i) => i + 1))
}

const HOSTILE = `x'); DROP TABLE artifact_rows; --`

describe("query compiler", () => {
  it.each([
    ["eq", { field: HOSTILE, op: "eq", value: HOSTILE }, `= $`, JSON.stringify(HOSTILE)],
    ["eq object", { field: "m", op: "eq", value: { k: [1, HOSTILE] } }, `= $`, JSON.stringify({ k: [1, HOSTILE] })],
    ["ne", { field: "m", op: "ne", value: null }, `IS DISTINCT FROM $`, "null"],
    ["lt number", { field: "n", op: "lt", value: 9 }, `NULLIF(`, "9"],
    ["lt number, mixed column", { field: "m", op: "lt", value: 9 }, `= 'number' AND`, "9"],
    ["lte string", { field: "s", op: "lte", value: HOSTILE }, `COLLATE "C" <=`, HOSTILE],
    ["gt", { field: "m", op: "gt", value: 1.5 }, `>`, "1.5"],
    ["gte", { field: "m", op: "gte", value: "a" }, `>=`, "a"],
    ["contains string", { field: "s", op: "contains", value: HOSTILE }, `strpos(`, HOSTILE],
    ["contains non-string", { field: "m", op: "contains", value: 3 }, `jsonb_array_elements(`, "3"],
    ["in", { field: "m", op: "in", value: [1, "two", null, HOSTILE] }, ` IN (SELECT e.v FROM jsonb_array_elements($`, JSON.stringify([1, "two", null, HOSTILE])],
    ["exists", { field: HOSTILE, op: "exists", value: true }, `<> 'null'`, HOSTILE],
    ["exists false", { field: "z", op: "exists", value: false }, `= 'null'`, "z"]
  ])("%s: the value and field are parameters, never SQL text", (_, predicate, fragment, param) => {
    const compiled = compileRowQuery(target, rowQuery({ filter: [predicate] }))
    for (const statement of [compiled.page!, compiled.count!]) {
      expect(statement.text).toContain(fragment)
      expect(statement.text).not.toContain("DROP")
      expect(statement.params).toContain(param)
      expectBound(statement)
    }
  })

  it("compiles a predicate no row can meet to false, binding nothing for it", () => {
    const compiled = compileRowQuery(target, rowQuery({ filter: [{ field: "s", op: "contains", value: 3 }] }))
    expect(compiled.count!.text).toMatch(/WHERE r\.content_id = \$1::int8 AND false$/)
    expectBound(compiled.count!)
  })

  it("coerces a string value to the column's type (\"10\" against numbers compares as 10)", () => {
    const compiled = compileRowQuery(target, rowQuery({ filter: [{ field: "n", op: "lt", value: "10" }, { field: "b", op: "eq", value: "TRUE" }] }))
    expect(compiled.count!.params).toContain("10")
    expect(compiled.count!.params).toContain("true")
    expect(compiled.count!.text).toContain("NULLIF(")
  })

  it("compares a dotted field as the exact key first, then the nested path", () => {
    const compiled = compileRowQuery(target, rowQuery({ filter: [{ field: "user.name", op: "eq", value: "a" }] }))
    expect(compiled.count!.text).toMatch(/COALESCE\(\(r\.data -> \$\d+::text\), \(r\.data -> \$\d+::text -> \$\d+::text\)\)/)
    expect(compiled.count!.params).toEqual(expect.arrayContaining(["user.name", "user", "name"]))
  })

  it("sorts a one-type column with one term, a mixed one by type rank first, a null one not at all", () => {
    const sql = (field: string, dir: "asc" | "desc") => compileRowQuery(target, rowQuery({ sort: [{ field, dir }] })).page!.text
    expect(sql("n", "desc")).toContain(`NULLIF(`)
    expect(sql("n", "desc")).not.toContain(`AS k1`)
    expect(sql("n", "desc")).toContain(`k0 DESC NULLS LAST`)
    expect(sql("s", "asc")).toContain(`COLLATE "C" AS k0`)
    expect(sql("m", "desc")).toMatch(/WHEN 'number' THEN 0 .* AS k0, .* AS k1, .* AS k2, .* AS k3/)
    expect(sql("m", "desc")).toContain("k0 ASC NULLS LAST, k1 DESC NULLS LAST")
    expect(sql("z", "asc")).not.toContain("AS k0")
    // Ties always fall back to the upload order.
    expect(sql("n", "asc")).toMatch(/ORDER BY k0 ASC NULLS LAST, r\.row_no LIMIT/)
  })

  it("binds windows, ranges, search and selected names", () => {
    const compiled = compileRowQuery(target, rowQuery({
      search: HOSTILE.toUpperCase(),
      select: [HOSTILE, "n"],
      offset: 7,
      limit: 3,
      range: { rowStart: 10, rowEnd: 500 }
    }))
    const page = compiled.page!
    expectBound(page)
    expect(page.text).not.toContain("DROP")
    expect(page.params).toEqual(expect.arrayContaining([HOSTILE.toLowerCase(), HOSTILE, 7, 3, 10, 500]))
    // A search alone scans the search rows, and reads the documents of the page only.
    expect(page.text).toContain("FROM artifact_row_search s WHERE")
    expect(page.text).toContain("JOIN artifact_rows r ON")
    expect(compiled.count!.text).toContain("count(*)")
    expect(compiled.count!.text).not.toContain("artifact_rows")
    // With a filter the keys cannot answer, the documents are scanned, joined to the search rows.
    const mixed = compileRowQuery(target, rowQuery({ search: "x", filter: [{ field: "s", op: "eq", value: "a" }] }))
    expect(mixed.page!.text).toContain("JOIN artifact_row_search s")
  })

  it("knows the total without counting when nothing filters, and skips the page for limit 0", () => {
    expect(compileRowQuery(target, rowQuery({})).count).toBeUndefined()
    expect(compileRowQuery(target, rowQuery({})).knownTotal).toBe(1000)
    expect(compileRowQuery(target, rowQuery({ range: { rowStart: 990, rowEnd: 5000 } })).knownTotal).toBe(10)
    expect(compileRowQuery(target, rowQuery({ range: { rowStart: 2000 } })).knownTotal).toBe(0)
    const countOnly = compileRowQuery(target, rowQuery({ limit: 0, filter: [{ field: "n", op: "exists" }] }))
    expect(countOnly.page).toBeUndefined()
    expect(countOnly.count).toBeDefined()
  })

  it("keeps the column order in returned rows when every column is listed, else the stored order", () => {
    expect(compileRowQuery(target, rowQuery({})).page!.text).toContain("unnest($")
    expect(compileRowQuery(target, rowQuery({})).page!.params).toContainEqual(["n", "s", "b", "m", "z"])
    expect(compileRowQuery({ ...target, allColumnsListed: false }, rowQuery({})).page!.text).not.toContain("unnest(")
    expect(compileRowQuery(target, rowQuery({ original: true })).page!.text).toContain("p.d || COALESCE(p.o")
  })

  it("picks the row keys: number columns without a dot, at most MAX_KEY_COLUMNS, in column order", () => {
    expect(keyColumns(columns)).toEqual(["n"])
    const many: ReadonlyArray<Column> = [
      { name: "a.b", type: "number" },
      ...Array.from({ length: 2 * MAX_KEY_COLUMNS + 5 }, (_, i) => ({ name: `c${i}`, type: i % 2 === 0 ? "number" as const : "string" as const }))
    ]
    const picked = keyColumns(many)
    expect(picked).toHaveLength(MAX_KEY_COLUMNS)
    expect(picked[0]).toBe("c0")
    expect(picked[1]).toBe("c2")
  })

  it("writes each row's keys as an array literal: numbers as JavaScript prints them, NULL for null, missing or inherited", () => {
    const rows = [{ n: 1.5, m: -2 }, { n: null }, {}, { n: 1e21, m: "7" }, JSON.parse(`{"__proto__": 5}`)]
    expect(keysLines(rows, ["n", "m"]).split("\n")).toEqual(["{1.5,-2}", "{NULL,NULL}", "{NULL,NULL}", "{1e+21,NULL}", "{NULL,NULL}"])
    expect(keysLines([{}], ["constructor", "__proto__"])).toBe("{NULL,NULL}")
    expect(keysLines(rows.slice(4), ["__proto__"])).toBe("{5}")
  })

  it("answers from the row keys what they hold exactly, with the field's key index bound", () => {
    const keysPlan = (body: unknown) => {
      const compiled = compileRowQuery(keyed, rowQuery(body))
      for (const statement of [compiled.page, compiled.count]) if (statement !== undefined) expectBound(statement)
      return compiled.count?.text.includes("FROM artifact_row_search s WHERE") ?? compiled.page!.text.includes("FROM artifact_row_search s WHERE")
    }
    for (const op of ["eq", "ne", "lt", "lte", "gt", "gte"]) expect(keysPlan({ filter: [{ field: "n", op, value: 5 }] }), op).toBe(true)
    expect(keysPlan({ filter: [{ field: "n", op: "in", value: [1, 2.5] }] })).toBe(true)
    expect(keysPlan({ filter: [{ field: "n", op: "exists", value: false }] })).toBe(true)
    expect(keysPlan({ sort: [{ field: "n", dir: "desc" }, { field: "z", dir: "asc" }] })).toBe(true)
    // A key is NULL for null and missing alike: `eq null` and `in [.., null]` must read the document.
    expect(keysPlan({ filter: [{ field: "n", op: "eq", value: null }] })).toBe(false)
    expect(keysPlan({ filter: [{ field: "n", op: "in", value: [1, null] }] })).toBe(false)
    expect(keysPlan({ filter: [{ field: "n", op: "gt", value: "abc" }] })).toBe(false)
    expect(keysPlan({ filter: [{ field: "n", op: "contains", value: 1 }] })).toBe(false)
    expect(keysPlan({ filter: [{ field: "n", op: "gt", value: 1 }], sort: [{ field: "s", dir: "asc" }] })).toBe(false)
    expect(keysPlan({ filter: [{ field: "n", op: "gt", value: 1 }, { field: "s", op: "eq", value: "a" }] })).toBe(false)
    // No filter, search or sort: the documents' key range, as before.
    expect(compileRowQuery(keyed, rowQuery({})).page!.text).not.toContain("artifact_row_search")
    // A content without row keys never reads them.
    expect(compileRowQuery(target, rowQuery({ filter: [{ field: "n", op: "gt", value: 1 }] })).count!.text).not.toContain("nums")

    const compiled = compileRowQuery(keyed, rowQuery({ filter: [{ field: "n", op: "gt", value: "50" }], sort: [{ field: "n", dir: "desc" }], limit: 20, original: true }))
    expect(compiled.count!.text).toBe("SELECT count(*)::int4 AS total FROM artifact_row_search s WHERE s.content_id = $1::int8 AND (s.nums[$2::int4] > $3::float8)")
    expect(compiled.count!.params).toEqual(["42", 1, "50"])
    expect(compiled.page!.text).toContain("s.nums[$4::int4] AS k0")
    expect(compiled.page!.text).toContain("ORDER BY k0 DESC NULLS LAST, s.row_no LIMIT")
    expect(compiled.page!.text).toContain("(r.data || COALESCE(r.original, '{}'::jsonb))")
  })

  it("slices text by byte range from the chunks that hold it, and trims to whole characters", () => {
    const C = 256 * 1024
    const compiled = compileTextQuery("9", 3 * C, { kind: "text", byteStart: C - 2, byteEnd: C + 10 })
    expect(compiled.statement!.params).toEqual([C - 2 + 1, 15, "9", 0, 1])
    expect(compileTextQuery("9", 100, { kind: "text", byteStart: 100, byteEnd: undefined }).statement).toBeUndefined()
    const capped = compileTextQuery("9", 5 * 1024 * 1024, { kind: "text", byteStart: 0, byteEnd: undefined })
    expect(capped.cut).toBe(1024 * 1024)

    // "aé€😀b": a(1) é(2) €(3) 😀(4) b(1). Bytes 2..7 start inside é and end inside 😀.
    const bytes = Buffer.from("aé€😀b")
    const slice = compileTextQuery("9", bytes.length, { kind: "text", byteStart: 2, byteEnd: 7 })
    const fetched = bytes.subarray(slice.start, slice.fetchEnd)
    expect(trimToCharacters(fetched, slice)).toEqual({ text: "€😀", byteStart: 3, byteEnd: 10 })
  })
})
