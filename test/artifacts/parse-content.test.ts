/** Reading content at upload: formats, type inference, originals, hints, and what stays text. */
import { describe, expect, it } from "vitest"
import { type ParseHints, parseContent, type ParsedTable } from "../../src/artifacts/parse-content.ts"
import { piecesOf } from "../../src/artifacts/row-batches.ts"

const parse = (text: string, hints: ParseHints = {}, value?: unknown) => parseContent(text, Buffer.byteLength(text), hints, value)
const asTable = (text: string, hints: ParseHints = {}) => {
  const parsed = parse(text, hints)
  if (parsed.kind !== "table") throw new Error(`expected a table, got ${parsed.format} text`)
  return parsed as ParsedTable
}

describe("parsing content", () => {
  it("reads RFC 4180 CSV: quoted fields with commas, doubled quotes and newlines, CRLF, a header", () => {
    const t = asTable(`id,name,note\r\n1,"Smith, Ann","said ""hi""\r\nthen left"\r\n2,Bob,\r\n`)
    expect(t.format).toBe("csv")
    expect(t.rows).toEqual([
      { id: 1, name: "Smith, Ann", note: "said \"hi\"\r\nthen left" },
      { id: 2, name: "Bob", note: "" }
    ])
    expect(t.shape).toEqual({ kind: "table", rowCount: 2, columnCount: 3, columns: [{ name: "id", type: "number" }, { name: "name", type: "string" }, { name: "note", type: "string" }] })
  })

  it("types columns so numbers compare as numbers, keeping the original text where it prints differently", () => {
    const t = asTable("n,zip,big,flag,mixed\n9,02134,12345678901234567890,true,1\n10,02139,1,FALSE,x\n1.50,,2,,\n", { format: "csv" })
    expect(t.shape.columns.map((c) => c.type)).toEqual(["number", "string", "string", "boolean", "string"])
    expect(t.rows.map((r) => r.n)).toEqual([9, 10, 1.5])
    expect(t.rows[1].flag).toBe(false)
    expect(t.rows[2].flag).toBeNull()
    expect(t.rows[0].big).toBe("12345678901234567890")
    expect(t.originals).toEqual([null, { flag: "FALSE" }, { n: "1.50", flag: "" }])
  })

  it("reads TSV, by media type or by detection", () => {
    expect(asTable("a\tb\n1\tx y\n", { format: "tsv" }).rows).toEqual([{ a: 1, b: "x y" }])
    const detected = asTable("a\tb\n1\tx, y\n2\tz\n")
    expect(detected.format).toBe("tsv")
    expect(detected.rows[0]).toEqual({ a: 1, b: "x, y" })
  })

  it("names columns: duplicates get a suffix, blanks and extra cells get column_N; schema names a header-less file", () => {
    const t = asTable("a,a,\n1,2,3,4\n", { format: "csv" })
    expect(t.shape.columns.map((c) => c.name)).toEqual(["a", "a_2", "column_3", "column_4"])
    const headerless = asTable("1,x\n2,y\n", { format: "csv", header: false, columns: [{ name: "id" }, { name: "label", type: "string" }] })
    expect(headerless.rows).toEqual([{ id: 1, label: "x" }, { id: 2, label: "y" }])
    const forced = asTable("zip\n02134\n", { format: "csv", columns: [{ name: "zip", type: "number" }] })
    expect(forced.rows[0].zip).toBe(null)
    expect(forced.originals[0]).toEqual({ zip: "02134" })
    expect(() => parse("a\n1\n", { format: "csv", columns: [{ name: "b" }] })).toThrow(/schema.columns\[0\].name/)
  })

  it("reads JSON arrays of objects, an object holding one array of objects, and JSON Lines", () => {
    expect(asTable(`[{"a":1,"b":{"c":2}},{"a":"x"}]`).shape.columns).toEqual([{ name: "a", type: "mixed" }, { name: "b", type: "object" }])
    const wrapped = asTable(`{"meta":{"n":2},"items":[{"a":1},{"a":2}]}`)
    expect(wrapped.shape.rowsPath).toBe("items")
    expect(wrapped.rows).toEqual([{ a: 1 }, { a: 2 }])
    const lines = asTable(`{"a":1}\n\n{"a":null,"b":true}\n`)
    expect(lines.format).toBe("jsonl")
    expect(lines.shape.columns).toEqual([{ name: "a", type: "number" }, { name: "b", type: "boolean" }])
    expect(asTable("", { format: "jsonl" }).shape.rowCount).toBe(0)
    expect(parseContent(`[{"a":1}]`, 9, {}, [{ a: 1 }]).kind).toBe("table")
  })

  it("uses schema.rowsPath when an object holds several arrays", () => {
    const two = `{"users":[{"id":1}],"orders":[{"id":7},{"id":8}]}`
    expect(parse(two).kind).toBe("text")
    expect(asTable(two, { rowsPath: "orders" }).rows).toEqual([{ id: 7 }, { id: 8 }])
    expect(() => parse(two, { rowsPath: "nope" })).toThrow(/schema.rowsPath/)
  })

  it("keeps anything else as text, with its length in bytes and characters", () => {
    for (const text of ["Hello, world", "just words\nand more", `{"a":1}`, "[1,2,3]", "a,b\n1,2,3\n", `"quoted"`]) {
      expect(parse(text).kind).toBe("text")
    }
    expect(parse("héllo 😀\nline", {}).shape).toEqual({ kind: "text", length: 16, characters: 12, lines: 2 })
    expect(parse("a,b\n1,2\n", { format: "text" }).kind).toBe("text")
  })

  it("refuses a declared format that does not fit, naming the problem", () => {
    expect(() => parse("[1,", { format: "json" })).toThrow(/JSON could not be parsed/)
    expect(() => parse(`{"a":1}\nnot json`, { format: "jsonl" })).toThrow(/line 2 is not JSON/)
    expect(() => parse(`a,"b\n1,2`, { format: "csv" })).toThrow(/CSV could not be parsed/)
    expect(() => parse(`[{"a":"x\\u0000y"}]`, { format: "json" })).toThrow(/U\+0000/)
  })

  it("stores rows jsonb cannot hold as text when the format was only detected", () => {
    expect(parse(`[{"a":"x\\u0000y"}]`).kind).toBe("text")
    expect(parse(`[{"a":"\\ud800"}]`).kind).toBe("text")
    expect(parse(`[{"a":"a\\\\u0000"}]`).kind).toBe("table")
  })

  it("cuts rows into insert batches with their search text, after the raw chunks", () => {
    const t = asTable(`[{"A":"Ä"},{"A":"b"},{"A":"c"}]`)
    const pieces = [...piecesOf(t, new Uint8Array(300 * 1024), 5)]
    expect(pieces.map((p) => p.kind)).toEqual(["chunk", "chunk", "rows", "rows", "rows"])
    const first = pieces[2]
    if (first.kind !== "rows") throw new Error("expected rows")
    const text = (bytes: Uint8Array) => Buffer.from(bytes).toString("utf8")
    expect(first).toMatchObject({ firstRow: 0, count: 1 })
    expect([text(first.data), text(first.originals)]).toEqual([`{"A":"Ä"}`, ""])
    expect(text(first.search)).toBe(`{"a":"ä"}`)
    expect(first.keys).toBeUndefined()
  })

  it("writes one line per row: documents, originals (empty when none), search texts, row keys", () => {
    const t = asTable("n,s\n1.50,\"a\nB\"\n2,c\n,d\n", { format: "csv" })
    const [piece] = [...piecesOf(t, new Uint8Array(0), 1 << 20)]
    if (piece.kind !== "rows") throw new Error("expected rows")
    const text = (bytes: Uint8Array | undefined) => Buffer.from(bytes!).toString("utf8")
    // The line feed inside the quoted cell is escaped in the JSON text, so it cannot split a row.
    expect(text(piece.data).split("\n")).toEqual([`{"n":1.5,"s":"a\\nB"}`, `{"n":2,"s":"c"}`, `{"n":null,"s":"d"}`])
    expect(text(piece.originals).split("\n")).toEqual([`{"n":"1.50"}`, "", `{"n":""}`])
    expect(text(piece.search).split("\n")).toEqual([`{"n":1.5,"s":"a\\nb"}`, `{"n":2,"s":"c"}`, `{"n":null,"s":"d"}`])
    expect(text(piece.keys).split("\n")).toEqual(["{1.5}", "{2}", "{NULL}"])
  })
})
