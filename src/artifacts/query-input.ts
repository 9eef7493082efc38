/**
 * The query body, checked and normalized. Pure: a JSON value in, a `Query` or the first problem
 * (with the field it concerns, e.g. `filter[2].op`) out. Values are converted to the column's
 * type where that is exact ("10" against a number column compares as 10).
 */
import { type Column, Limits } from "./model.ts"
import { booleanFromText, isWellFormed, nestedDeeperThan, numberFromText, serializedBytes } from "./values.ts"
import type { Json } from "../util/json.ts"
import { isPlainObject } from "../util/json.ts"

const FilterOps = ["eq", "ne", "lt", "lte", "gt", "gte", "contains", "in", "exists"] as const
type FilterOp = typeof FilterOps[number]

export type Predicate =
  | { readonly field: string; readonly op: "eq" | "ne" | "contains"; readonly value: Json }
  | { readonly field: string; readonly op: "lt" | "lte" | "gt" | "gte"; readonly value: number | string }
  | { readonly field: string; readonly op: "in"; readonly value: ReadonlyArray<Json> }
  | { readonly field: string; readonly op: "exists"; readonly value: boolean }

export interface SortKey {
  readonly field: string
  readonly dir: "asc" | "desc"
}

/** A query on rows. Row numbers are 0-based; `rowEnd` is exclusive. */
export interface RowQuery {
  readonly kind: "rows"
  readonly filter: ReadonlyArray<Predicate>
  readonly sort: ReadonlyArray<SortKey>
  /** Lowercased; matched against each row's lowercased JSON text. */
  readonly search: string | undefined
  readonly select: ReadonlyArray<string> | undefined
  readonly offset: number
  readonly limit: number
  readonly rowStart: number | undefined
  readonly rowEnd: number | undefined
  /** Return CSV/TSV cells as the text they had in the upload instead of their typed values. */
  readonly original: boolean
}

/** A query on text: UTF-8 byte offsets, `byteEnd` exclusive. */
export interface TextQuery {
  readonly kind: "text"
  readonly byteStart: number
  readonly byteEnd: number | undefined
}

export type QueryCheck<A> = { readonly ok: true; readonly value: A } | { readonly ok: false; readonly param: string; readonly message: string }

const bad = (param: string, message: string): QueryCheck<never> => ({ ok: false, param, message: `${param}: ${message}` })
const good = <A>(value: A): QueryCheck<A> => ({ ok: true, value })

const describe = (v: unknown) => (v === undefined ? "nothing" : v === null ? "null" : Array.isArray(v) ? "an array" : `a ${typeof v}`)

const nonNegativeInt = (param: string, v: unknown, max?: number): QueryCheck<number | undefined> => {
  if (v === undefined || v === null) return good(undefined)
  if (typeof v !== "number" || !Number.isSafeInteger(v) || v < 0) {
    return bad(param, `expected a non-negative integer, got ${typeof v === "number" ? v : describe(v)}`)
  }
  if (max !== undefined && v > max) return bad(param, `at most ${max}, got ${v}`)
  return good(v)
}

/** Text the database can hold (no U+0000, no unpaired surrogate), in every string of a value. */
const storable = (v: unknown): boolean =>
  typeof v === "string"
    ? !v.includes("\u0000") && isWellFormed(v)
    : Array.isArray(v)
    ? v.every(storable)
    : typeof v === "object" && v !== null
    ? Object.entries(v).every(([k, x]) => storable(k) && storable(x))
    : true
const UNSTORABLE = "must not contain U+0000 or an unpaired surrogate (no stored row can)"

const checkField = (param: string, v: unknown): QueryCheck<string> => {
  if (typeof v !== "string") return bad(param, `expected a field name (a string), got ${describe(v)}`)
  if (v.length === 0) return bad(param, "a field name cannot be empty")
  if (v.length > Limits.maxFieldLength) return bad(param, `a field name is at most ${Limits.maxFieldLength} characters`)
  if (!storable(v)) return bad(param, UNSTORABLE)
  return good(v)
}

/** The version a body pins, checked before the artifact is read (its existence is checked after). */
export const readVersion = (body: unknown): QueryCheck<number | undefined> => {
  if (!isPlainObject(body) || body.version === undefined || body.version === null) return good(undefined)
  const v = body.version
  if (typeof v !== "number" || !Number.isSafeInteger(v) || v < 1) return bad("version", `expected a positive integer, got ${typeof v === "number" ? v : describe(v)}`)
  // Versions are 32-bit in storage; a larger one cannot exist.
  if (v > 2_147_483_647) return bad("version", `no artifact has version ${v}`)
  return good(v)
}

/** A filter value converted to the column's type when that is exact. */
const coerce = (value: Json, column: Column | undefined): Json => {
  if (column === undefined) return value
  if (typeof value === "string") {
    if (column.type === "number") return numberFromText(value) ?? value
    if (column.type === "boolean") return booleanFromText(value) ?? value
  }
  if (typeof value === "number" && column.type === "string") return String(value)
  return value
}

const checkPredicate = (i: number, v: unknown, columns: ReadonlyMap<string, Column>): QueryCheck<Predicate> => {
  const at = `filter[${i}]`
  if (!isPlainObject(v)) return bad(at, `expected an object {field, op, value}, got ${describe(v)}`)
  const field = checkField(`${at}.field`, v.field)
  if (!field.ok) return field
  if (typeof v.op !== "string" || !(FilterOps as ReadonlyArray<string>).includes(v.op)) {
    return bad(`${at}.op`, `expected one of ${FilterOps.join(", ")}, got ${typeof v.op === "string" ? JSON.stringify(v.op) : describe(v.op)}`)
  }
  const op = v.op as FilterOp
  const column = columns.get(field.value)
  const raw = v.value as Json | undefined
  if (nestedDeeperThan(raw, Limits.maxValueDepth)) return bad(`${at}.value`, `nests deeper than ${Limits.maxValueDepth} levels`)
  if (raw !== undefined && serializedBytes(raw) > Limits.maxValueBytes) {
    return bad(`${at}.value`, `at most ${Limits.maxValueBytes} bytes of JSON`)
  }
  if (!storable(raw)) return bad(`${at}.value`, UNSTORABLE)
  switch (op) {
    case "exists": {
      if (raw !== undefined && raw !== null && typeof raw !== "boolean") return bad(`${at}.value`, `exists takes true or false, got ${describe(raw)}`)
      return good({ field: field.value, op, value: raw ?? true })
    }
    case "in": {
      if (!Array.isArray(raw)) return bad(`${at}.value`, `in takes an array of values, got ${describe(raw)}`)
      if (raw.length > Limits.maxInValues) return bad(`${at}.value`, `in takes at most ${Limits.maxInValues} values`)
      return good({ field: field.value, op, value: raw.map((x) => coerce(x, column)) })
    }
    case "lt":
    case "lte":
    case "gt":
    case "gte": {
      if (typeof raw !== "number" && typeof raw !== "string") return bad(`${at}.value`, `${op} compares with a number or a string, got ${describe(raw)}`)
      // Ordering converts only to a number ("10" against a number column); "true" stays a string.
      const value = coerce(raw, column)
      return good({ field: field.value, op, value: typeof value === "number" || typeof value === "string" ? value : raw })
    }
    default: {
      if (raw === undefined) return bad(`${at}.value`, `${op} needs a value`)
      return good({ field: field.value, op, value: op === "contains" ? raw : coerce(raw, column) })
    }
  }
}

const checkFilter = (v: unknown, columns: ReadonlyMap<string, Column>): QueryCheck<ReadonlyArray<Predicate>> => {
  if (v === undefined || v === null) return good([])
  if (!Array.isArray(v)) return bad("filter", `expected an array of {field, op, value}, got ${describe(v)}`)
  if (v.length > Limits.maxFilters) return bad("filter", `at most ${Limits.maxFilters} predicates`)
  const out: Array<Predicate> = []
  for (let i = 0; i < v.length; i++) {
    const p = checkPredicate(i, v[i], columns)
    if (!p.ok) return p
    out.push(p.value)
  }
  return good(out)
}

const checkSort = (v: unknown): QueryCheck<ReadonlyArray<SortKey>> => {
  if (v === undefined || v === null) return good([])
  if (!Array.isArray(v)) return bad("sort", `expected an array of {field, dir}, got ${describe(v)}`)
  if (v.length > Limits.maxSortKeys) return bad("sort", `at most ${Limits.maxSortKeys} keys`)
  const out: Array<SortKey> = []
  for (let i = 0; i < v.length; i++) {
    const key = v[i]
    if (!isPlainObject(key)) return bad(`sort[${i}]`, `expected an object {field, dir}, got ${describe(key)}`)
    const field = checkField(`sort[${i}].field`, key.field)
    if (!field.ok) return field
    const dir = key.dir ?? "asc"
    if (dir !== "asc" && dir !== "desc") return bad(`sort[${i}].dir`, `expected "asc" or "desc", got ${JSON.stringify(dir)}`)
    out.push({ field: field.value, dir })
  }
  return good(out)
}

const checkSelect = (v: unknown): QueryCheck<ReadonlyArray<string> | undefined> => {
  if (v === undefined || v === null) return good(undefined)
  if (!Array.isArray(v)) return bad("select", `expected an array of field names, got ${describe(v)}`)
  if (v.length > Limits.maxSelect) return bad("select", `at most ${Limits.maxSelect} fields`)
  const out: Array<string> = []
  for (let i = 0; i < v.length; i++) {
    const f = checkField(`select[${i}]`, v[i])
    if (!f.ok) return f
    if (!out.includes(f.value)) out.push(f.value)
  }
  return good(out)
}

const ROW_FIELDS = ["filter", "sort", "search", "select", "offset", "limit", "original"] as const

/**
 * The query for an artifact of the given shape. `structured` false means text: only
 * `range.byteStart`/`byteEnd` apply, and the row fields are refused rather than ignored.
 */
export const checkQuery = (body: unknown, target: { readonly structured: boolean; readonly columns: ReadonlyArray<Column> }): QueryCheck<RowQuery | TextQuery> => {
  if (body === undefined || body === null) body = {}
  if (!isPlainObject(body)) return { ok: false, param: "", message: `The query body must be a JSON object, got ${describe(body)}` }
  const range = body.range ?? undefined
  if (range !== undefined && range !== null && !isPlainObject(range)) return bad("range", `expected an object, got ${describe(range)}`)
  const r = isPlainObject(range) ? range : {}

  if (!target.structured) {
    for (const name of ROW_FIELDS) {
      if (body[name] !== undefined && body[name] !== null) return bad(name, "this artifact is unstructured text; use range.byteStart and range.byteEnd")
    }
    for (const name of ["rowStart", "rowEnd"]) {
      if (r[name] !== undefined && r[name] !== null) return bad(`range.${name}`, "this artifact is unstructured text; use range.byteStart and range.byteEnd")
    }
    const byteStart = nonNegativeInt("range.byteStart", r.byteStart)
    if (!byteStart.ok) return byteStart
    const byteEnd = nonNegativeInt("range.byteEnd", r.byteEnd)
    if (!byteEnd.ok) return byteEnd
    const start = byteStart.value ?? 0
    if (byteEnd.value !== undefined && byteEnd.value < start) return bad("range.byteEnd", `must not be below range.byteStart (${start})`)
    return good({ kind: "text", byteStart: start, byteEnd: byteEnd.value })
  }

  for (const name of ["byteStart", "byteEnd"]) {
    if (r[name] !== undefined && r[name] !== null) return bad(`range.${name}`, "byte ranges apply to unstructured text; this artifact has rows: use range.rowStart and range.rowEnd")
  }
  const columns = new Map(target.columns.map((c) => [c.name, c]))
  const filter = checkFilter(body.filter, columns)
  if (!filter.ok) return filter
  const sort = checkSort(body.sort)
  if (!sort.ok) return sort
  const search = body.search ?? undefined
  if (search !== undefined && typeof search !== "string") return bad("search", `expected a string, got ${describe(search)}`)
  if (search !== undefined && search.length > Limits.maxSearchLength) return bad("search", `at most ${Limits.maxSearchLength} characters`)
  if (search !== undefined && !storable(search)) return bad("search", UNSTORABLE)
  const select = checkSelect(body.select)
  if (!select.ok) return select
  const offset = nonNegativeInt("offset", body.offset)
  if (!offset.ok) return offset
  const limit = nonNegativeInt("limit", body.limit, Limits.maxLimit)
  if (!limit.ok) return limit
  const rowStart = nonNegativeInt("range.rowStart", r.rowStart)
  if (!rowStart.ok) return rowStart
  const rowEnd = nonNegativeInt("range.rowEnd", r.rowEnd)
  if (!rowEnd.ok) return rowEnd
  if (rowEnd.value !== undefined && rowEnd.value < (rowStart.value ?? 0)) return bad("range.rowEnd", `must not be below range.rowStart (${rowStart.value ?? 0})`)
  const original = body.original ?? false
  if (typeof original !== "boolean") return bad("original", `expected true or false, got ${describe(original)}`)
  return good({
    kind: "rows",
    filter: filter.value,
    sort: sort.value,
    search: search === undefined || search === "" ? undefined : search.toLowerCase(),
    select: select.value,
    offset: offset.value ?? 0,
    limit: limit.value ?? Limits.defaultLimit,
    rowStart: rowStart.value,
    rowEnd: rowEnd.value,
    original
  })
}
