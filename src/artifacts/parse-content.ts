/**
 * Reading uploaded content into rows, once, at upload. Pure and synchronous: the upload runs it
 * in a worker thread for anything but small bodies (`content-parser.ts`), so it may take its time.
 *
 * Formats: CSV (RFC 4180) and TSV through `csv-parse`; a JSON array of objects; a JSON object
 * holding one array of objects; JSON Lines. CSV/TSV cells get a type per column (number, boolean
 * or string) so comparisons are numeric where the column is; a cell whose typed value does not
 * print back as its text ("1.50", "") keeps that text in `originals`. Anything else is text.
 */
import { parse as parseCsv } from "csv-parse/sync"
import { type Column, type ColumnType, type Format, Limits, type Shape } from "./model.ts"
import { isPlainObject, jsonType } from "../util/json.ts"
import { booleanFromText, hasUnstorableEscape, nestedDeeperThan, numberFromText, type Row } from "./values.ts"
import type { Json } from "../util/json.ts"

/** What the uploader told us (mimeType and `schema`), normalized. */
export interface ParseHints {
  /** A format the upload declared; absent → detected from the content. */
  readonly format?: Format | undefined
  /** CSV/TSV: whether the first record names the columns (default true). */
  readonly header?: boolean | undefined
  /** CSV/TSV: names (without a header) and types (forced instead of inferred). */
  readonly columns?: ReadonlyArray<{ readonly name: string; readonly type?: "number" | "string" | "boolean" | undefined }> | undefined
  /** JSON: the key of the top-level object that holds the rows. */
  readonly rowsPath?: string | undefined
}

export interface ParsedTable {
  readonly kind: "table"
  readonly format: Format
  readonly shape: Shape & { readonly kind: "table" }
  readonly rows: ReadonlyArray<Row>
  /** Per row: the original text of cells whose typed value prints differently, or null. */
  readonly originals: ReadonlyArray<Row | null>
  /** Per row: its JSON text (serialized once, to check it and then to store it). */
  readonly texts: ReadonlyArray<string>
}

/** A table before its rows are serialized and checked. */
type TableCandidate = Omit<ParsedTable, "texts">

interface ParsedText {
  readonly kind: "text"
  readonly format: Format
  readonly shape: Shape & { readonly kind: "text" }
}

export type Parsed = ParsedTable | ParsedText

/**
 * A content that cannot be stored as declared: 400 naming `param` (default: the content field),
 * or 413 when `tooLarge` (more rows than an artifact holds).
 */
export class ContentParseError extends Error {
  readonly details: { readonly param?: string; readonly tooLarge?: boolean }
  constructor(message: string, details: { readonly param?: string; readonly tooLarge?: boolean } = {}) {
    super(message)
    this.details = details
  }
}

/** How a parse failure is reported: a 413 for too many rows, else a 400 naming the field. */
export const parseFailure = (error: ContentParseError, contentField: string) =>
  error.details.tooLarge
    ? { type: "too-large" as const, message: `${contentField}: ${error.message}` }
    : error.details.param !== undefined
    ? { type: "invalid" as const, param: error.details.param, message: error.message }
    : { type: "invalid" as const, param: contentField, message: `${contentField}: ${error.message}` }

const tooManyRows = (count: number | string) =>
  new ContentParseError(`${count} rows; an artifact holds at most ${Limits.maxRows.toLocaleString("en")}`, { tooLarge: true })

const textShape = (text: string, byteLength: number): ParsedText["shape"] => {
  let characters = 0
  for (const _ of text) characters++
  let lines = text.length === 0 ? 0 : 1
  for (let i = text.indexOf("\n"); i !== -1; i = text.indexOf("\n", i + 1)) lines++
  if (text.endsWith("\n")) lines--
  return { kind: "text", length: byteLength, characters, lines }
}

/** Column types over the rows, in first-seen key order. */
const inferColumns = (rows: ReadonlyArray<Row>): { columns: Array<Column>; count: number } => {
  const types = new Map<string, ColumnType>()
  for (const row of rows) {
    for (const key in row) {
      const value = row[key]
      const seen = types.get(key)
      if (value === null) {
        if (seen === undefined) types.set(key, "null")
        continue
      }
      const type = jsonType(value) as ColumnType
      if (seen === undefined || seen === "null") types.set(key, type)
      else if (seen !== type) types.set(key, "mixed")
    }
  }
  const columns = [...types].slice(0, Limits.maxListedColumns).map(([name, type]) => ({ name, type }))
  return { columns, count: types.size }
}

/** Rows are stored as jsonb: each must fit and hold only characters jsonb can store. */
const serializeRows = (rows: ReadonlyArray<Row>): { texts: Array<string> } | { problem: string } => {
  const texts: Array<string> = new Array(rows.length)
  for (let i = 0; i < rows.length; i++) {
    if (nestedDeeperThan(rows[i], Limits.maxRowDepth)) return { problem: `row ${i} nests deeper than ${Limits.maxRowDepth} levels` }
    const text = JSON.stringify(rows[i])
    // A UTF-16 unit is at most 3 UTF-8 bytes: count bytes only for rows that might be too large.
    if (text.length * 3 > Limits.maxRowBytes && Buffer.byteLength(text) > Limits.maxRowBytes) {
      return { problem: `row ${i} is larger than ${Limits.maxRowBytes} bytes` }
    }
    if (hasUnstorableEscape(text)) return { problem: `row ${i} holds U+0000 or an unpaired surrogate, which rows cannot store` }
    texts[i] = text
  }
  return { texts }
}

const table = (format: Format, rows: ReadonlyArray<Row>, originals: ReadonlyArray<Row | null>, rowsPath?: string): TableCandidate => {
  if (rows.length > Limits.maxRows) throw tooManyRows(rows.length)
  const { columns, count } = inferColumns(rows)
  return {
    kind: "table",
    format,
    rows,
    originals,
    shape: { kind: "table", rowCount: rows.length, columns, columnCount: count, ...(rowsPath === undefined ? {} : { rowsPath }) }
  }
}

const uniqueName = (wanted: string, taken: Set<string>) => {
  let name = wanted
  for (let n = 2; taken.has(name); n++) name = `${wanted}_${n}`
  taken.add(name)
  return name
}

type CellType = "number" | "boolean" | "string"

/** The type every non-empty cell of a column fits: number, then boolean, else string. */
const cellTypeOf = (records: ReadonlyArray<ReadonlyArray<string>>, column: number): CellType => {
  let number = true
  let boolean = true
  let any = false
  for (const record of records) {
    const cell = record[column]
    if (cell === undefined || cell === "") continue
    any = true
    if (number && numberFromText(cell) === undefined) number = false
    if (boolean && booleanFromText(cell) === undefined) boolean = false
    if (!number && !boolean) return "string"
  }
  return !any ? "string" : number ? "number" : boolean ? "boolean" : "string"
}

const typedCell = (cell: string, type: CellType): Json => {
  if (type === "string") return cell
  if (cell === "") return null
  return (type === "number" ? numberFromText(cell) : booleanFromText(cell)) ?? null
}

/**
 * CSV or TSV. `strict` (when detecting) also demands at least two records of the same width,
 * two fields or more, so prose with a comma stays text.
 */
const parseDelimited = (text: string, format: "csv" | "tsv", hints: ParseHints, strict: boolean): TableCandidate | undefined => {
  let records: Array<Array<string>>
  try {
    records = parseCsv(text, {
      delimiter: format === "csv" ? "," : "\t",
      bom: true,
      relax_quotes: true,
      relax_column_count: !strict,
      skip_empty_lines: true,
      // Stop reading past the row limit, so memory stays bounded whatever the content.
      to: Limits.maxRows + 2
    })
  } catch (error) {
    if (strict) return undefined
    throw new ContentParseError(`${format.toUpperCase()} could not be parsed: ${(error as Error).message}`)
  }
  if (strict && (records.length < 2 || records[0].length < 2)) return undefined
  if (records.length > Limits.maxRows + 1) throw tooManyRows("more than the limit of")

  const header = hints.header ?? true
  const width = records.reduce((w, r) => Math.max(w, r.length), 0)
  const taken = new Set<string>()
  const names: Array<string> = []
  const given = hints.columns ?? []
  const headerRow = header ? records[0] ?? [] : []
  for (let i = 0; i < Math.max(width, header ? 0 : given.length); i++) {
    const wanted = header ? headerRow[i] : given[i]?.name
    names.push(uniqueName(wanted === undefined || wanted === "" ? `column_${i + 1}` : wanted, taken))
  }
  if (header) {
    for (const [i, column] of given.entries()) {
      if (!names.includes(column.name)) {
        throw new ContentParseError(`schema.columns[${i}].name: the header has no column ${JSON.stringify(column.name)}`, { param: `schema.columns[${i}].name` })
      }
    }
  }
  const body = header ? records.slice(1) : records
  const forced = new Map(given.filter((c) => c.type !== undefined).map((c) => [c.name, c.type!]))
  const types = names.map((name, i) => forced.get(name) ?? cellTypeOf(body, i))

  const rows: Array<Row> = new Array(body.length)
  const originals: Array<Row | null> = new Array(body.length)
  for (let r = 0; r < body.length; r++) {
    const record = body[r]
    const row: Record<string, Json> = {}
    let original: Record<string, Json> | null = null
    for (let c = 0; c < record.length; c++) {
      const cell = record[c]
      const value = typedCell(cell, types[c])
      row[names[c]] = value
      if (typeof value !== "string" && String(value) !== cell) (original ??= {})[names[c]] = cell
    }
    rows[r] = row
    originals[r] = original
  }
  const parsed = table(format, rows, originals)
  // Columns whose type was forced report it even when a cell did not fit (it is then null).
  return { ...parsed, shape: { ...parsed.shape, columns: parsed.shape.columns.map((c, i) => (forced.has(c.name) ? { ...c, type: types[i] } : c)) } }
}

/** The rows of a JSON value, or undefined when it is not tabular. */
const rowsOfJson = (value: unknown, hints: ParseHints): { rows: ReadonlyArray<Row>; rowsPath?: string } | undefined => {
  const isRowArray = (v: unknown): v is ReadonlyArray<Row> => Array.isArray(v) && v.every(isPlainObject)
  if (hints.rowsPath !== undefined) {
    if (!isPlainObject(value) || !isRowArray(value[hints.rowsPath])) {
      throw new ContentParseError(`schema.rowsPath: the content is not an object whose ${JSON.stringify(hints.rowsPath)} is an array of objects`, { param: "schema.rowsPath" })
    }
    return { rows: value[hints.rowsPath] as unknown as ReadonlyArray<Row>, rowsPath: hints.rowsPath }
  }
  if (isRowArray(value)) return { rows: value }
  if (isPlainObject(value)) {
    const candidates = Object.keys(value).filter((k) => {
      const v = value[k]
      return Array.isArray(v) && v.length > 0 && isRowArray(v)
    })
    if (candidates.length === 1) return { rows: value[candidates[0]] as unknown as ReadonlyArray<Row>, rowsPath: candidates[0] }
  }
  return undefined
}

const parseJsonLines = (text: string): ReadonlyArray<Row> | string => {
  const rows: Array<Row> = []
  const lines = text.split("\n")
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i].trim()
    if (line === "") continue
    let value: unknown
    try {
      value = JSON.parse(line)
    } catch (error) {
      return `JSON Lines: line ${i + 1} is not JSON (${(error as Error).message})`
    }
    if (!isPlainObject(value)) return `JSON Lines: line ${i + 1} is not a JSON object`
    if (rows.length === Limits.maxRows) throw tooManyRows("more than the limit of")
    rows.push(value)
  }
  return rows
}

const tableOrText = (candidate: TableCandidate, text: string, byteLength: number, forced: boolean): Parsed => {
  const serialized = serializeRows(candidate.rows)
  if ("texts" in serialized) return { ...candidate, texts: serialized.texts }
  if (forced) throw new ContentParseError(`${serialized.problem}; send it as text/plain to store it as text`)
  return { kind: "text", format: "text", shape: textShape(text, byteLength) }
}

/**
 * Reads content. `value` is the uploaded JSON value when it came as a non-string `content`
 * (already parsed; `text` is its serialization). Throws `ContentParseError` when a declared
 * format does not fit.
 */
export const parseContent = (text: string, byteLength: number, hints: ParseHints, value?: unknown): Parsed => {
  const format = hints.format
  const asText = (): Parsed => ({ kind: "text", format: format ?? "text", shape: textShape(text, byteLength) })
  if (format === "text") return asText()

  if (format === "csv" || format === "tsv") {
    return tableOrText(parseDelimited(text, format, hints, false)!, text, byteLength, true)
  }
  if (format === "jsonl") {
    const rows = parseJsonLines(text)
    if (typeof rows === "string") throw new ContentParseError(rows)
    return tableOrText(table("jsonl", rows, rows.map(() => null)), text, byteLength, true)
  }

  const trimmed = text.trimStart()
  const looksJson = value !== undefined || trimmed.startsWith("[") || trimmed.startsWith("{")
  if (format === "json" || looksJson) {
    let json: unknown = value
    let valid = value !== undefined
    if (!valid) {
      try {
        json = JSON.parse(text)
        valid = true
      } catch (error) {
        if (format === "json") throw new ContentParseError(`JSON could not be parsed: ${(error as Error).message}`)
      }
    }
    if (valid) {
      const found = rowsOfJson(json, hints)
      if (found === undefined) return { kind: "text", format: "json", shape: textShape(text, byteLength) }
      return tableOrText(table("json", found.rows, found.rows.map(() => null), found.rowsPath), text, byteLength, format === "json")
    }
    if (trimmed.startsWith("{")) {
      const rows = parseJsonLines(text)
      if (typeof rows !== "string" && rows.length > 0) return tableOrText(table("jsonl", rows, rows.map(() => null)), text, byteLength, false)
    }
    return asText()
  }

  for (const delimited of ["csv", "tsv"] as const) {
    const parsed = parseDelimited(text, delimited, hints, true)
    if (parsed !== undefined) return tableOrText(parsed, text, byteLength, false)
  }
  return asText()
}
