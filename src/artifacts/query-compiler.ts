/**
 * Artifact queries as SQL. Pure: a checked query (`query-input.ts`) and what we know of the
 * content in, parameterized statements out. Every field name, value, window and search text is a
 * bound parameter (`$n`); the SQL text is built only from this module's own fragments, so no input
 * can change a statement's meaning.
 *
 * The value rules are `values.ts`'s; `query-reference.ts` evaluates the same query in plain
 * TypeScript, and a property test holds the two to the same answers.
 *
 * Rows live in `artifact_rows (content_id, row_no, data jsonb, original jsonb)`; the search text
 * (each row's JSON, lowercased at upload) and the row keys (`row-keys.ts`: the number columns as
 * doubles) in `artifact_row_search (content_id, row_no, search, nums float8[])`; raw content in
 * `artifact_chunks (content_id, chunk_no, bytes)`. Each content's rows are one range of the primary
 * key, so a query reads one artifact's rows and nothing else.
 *
 * Two plans. When every filter and sort key can be answered from the row keys (and the search
 * text), the query scans only `artifact_row_search` — narrow rows, doubles compared without
 * reading jsonb — and reads the documents of the page's rows alone, by primary key. Anything else
 * (a string or mixed field, a dotted name, `eq null`) scans the documents in `artifact_rows`.
 */
import type { Predicate, RowQuery, SortKey, TextQuery } from "./query-input.ts"
import { type Column, Limits } from "./model.ts"

export interface SqlStatement {
  readonly text: string
  readonly params: ReadonlyArray<unknown>
}

/** What the compiler needs to know about the content a query reads. */
export interface TableTarget {
  readonly contentId: string
  readonly rowCount: number
  readonly columns: ReadonlyArray<Column>
  /** Whether `columns` lists every column (then returned rows keep the column order). */
  readonly allColumnsListed: boolean
  /** The row keys' column names (`keyColumns` of `columns`), when the content has row keys. */
  readonly keyColumns: ReadonlyArray<string> | undefined
}

export interface CompiledRowQuery {
  /** Absent when `limit` is 0. Each result row has one column `row`: the row's JSON text. */
  readonly page: SqlStatement | undefined
  /** Absent when the total is known without counting (no filter, no search). Result: `total`. */
  readonly count: SqlStatement | undefined
  readonly knownTotal: number | undefined
}

/** Collects parameters; `add` returns the `$n::type` placeholder for a value. */
class Params {
  readonly values: Array<unknown> = []
  add(value: unknown, type: string) {
    this.values.push(value)
    return `$${this.values.length}::${type}`
  }
}

/**
 * SQL for a field of a row document `doc`: the top-level key of that exact name when present,
 * else (for a dotted name) the path through nested objects — `->` with a text key yields NULL on
 * anything but an object, as `readField` does. NULL means missing.
 */
const accessor = (p: Params, doc: string, field: string) => {
  const exact = `(${doc} -> ${p.add(field, "text")})`
  if (!field.includes(".")) return exact
  const path = field.split(".").map((segment) => ` -> ${p.add(segment, "text")}`).join("")
  return `COALESCE(${exact}, (${doc}${path}))`
}

const typeOf = (a: string) => `jsonb_typeof(${a})`

const comparison = { lt: "<", lte: "<=", gt: ">", gte: ">=" } as const

/**
 * The one JSON type a field's values have (nulls and missing aside), when the column says so. Only
 * for plain names: a dotted name may read a nested value of any type where the key is missing.
 * Knowing it lets a predicate or sort skip the per-row type test.
 */
const singleType = (columns: ReadonlyMap<string, Column>, field: string) => {
  if (field.includes(".")) return undefined
  const type = columns.get(field)?.type
  return type === "number" || type === "string" || type === "boolean" || type === "null" ? type : undefined
}

const predicateSql = (p: Params, doc: string, predicate: Predicate, columns: ReadonlyMap<string, Column>): string => {
  const type = singleType(columns, predicate.field)
  // A string column never contains a non-string: no row matches (and no field is bound, since
  // an unused parameter is an error).
  if (predicate.op === "contains" && type === "string" && typeof predicate.value !== "string") return "false"
  const a = accessor(p, doc, predicate.field)
  switch (predicate.op) {
    case "eq":
      return `(${a} = ${p.add(JSON.stringify(predicate.value), "jsonb")})`
    case "ne":
      return `(${a} IS DISTINCT FROM ${p.add(JSON.stringify(predicate.value), "jsonb")})`
    case "lt":
    case "lte":
    case "gt":
    case "gte": {
      const op = comparison[predicate.op]
      // jsonb compares numbers numerically; strings compare by code point (COLLATE "C") so both
      // engines, whatever their locale, agree with each other and with TypeScript.
      if (typeof predicate.value === "number") {
        const bound = p.add(JSON.stringify(predicate.value), "jsonb")
        if (type !== "number") return `(${typeOf(a)} = 'number' AND ${a} ${op} ${bound})`
        // Numbers and nulls only: jsonb orders null below every number, so only < and <= need it out.
        return op === "<" || op === "<=" ? `(NULLIF(${a}, 'null'::jsonb) ${op} ${bound})` : `(${a} ${op} ${bound})`
      }
      const text = `(${a} #>> '{}') COLLATE "C" ${op} ${p.add(predicate.value, "text")}`
      // `#>>` reads a JSON null as SQL NULL, which matches nothing.
      return type === "string" ? `(${text})` : `(${typeOf(a)} = 'string' AND ${text})`
    }
    case "contains": {
      const inString = typeof predicate.value === "string" ? `strpos(${a} #>> '{}', ${p.add(predicate.value, "text")}) > 0` : "false"
      if (type === "string") return `(${inString})`
      const inArray = `EXISTS (SELECT 1 FROM jsonb_array_elements(${a}) AS e(v) WHERE e.v = ${p.add(JSON.stringify(predicate.value), "jsonb")})`
      return `(CASE ${typeOf(a)} WHEN 'string' THEN ${inString} WHEN 'array' THEN ${inArray} ELSE false END)`
    }
    case "in":
      return `(${a} IN (SELECT e.v FROM jsonb_array_elements(${p.add(JSON.stringify(predicate.value), "jsonb")}) AS e(v)))`
    case "exists":
      return `(COALESCE(${typeOf(a)}, 'null') ${predicate.value ? "<>" : "="} 'null')`
  }
}

/**
 * ORDER BY terms for one sort key (see `compareForSort`): rank by type, then the value within its
 * type. When the column holds one type, one term does it: nulls (made SQL NULL) go last.
 */
const sortTerms = (p: Params, doc: string, key: SortKey, columns: ReadonlyMap<string, Column>): ReadonlyArray<{ expr: string; dir: string }> => {
  const type = singleType(columns, key.field)
  // Only null values: every row ties. (Binding the field anyway would leave an unused parameter.)
  if (type === "null") return []
  const a = accessor(p, doc, key.field)
  const dir = key.dir === "desc" ? "DESC" : "ASC"
  switch (type) {
    case "number":
    case "boolean":
      // jsonb orders numbers numerically and false before true: no conversion per row.
      return [{ expr: `NULLIF(${a}, 'null'::jsonb)`, dir }]
    case "string":
      return [{ expr: `(${a} #>> '{}') COLLATE "C"`, dir }]
    default:
      return [
        {
          expr: `CASE ${typeOf(a)} WHEN 'number' THEN 0 WHEN 'string' THEN 1 WHEN 'boolean' THEN 2 WHEN 'array' THEN 3 WHEN 'object' THEN 3 ELSE 4 END`,
          dir: "ASC"
        },
        { expr: `CASE WHEN ${typeOf(a)} = 'number' THEN ${a} END`, dir },
        { expr: `CASE WHEN ${typeOf(a)} = 'string' THEN ${a} #>> '{}' END COLLATE "C"`, dir },
        { expr: `CASE WHEN ${typeOf(a)} = 'boolean' THEN ${a} END`, dir }
      ]
  }
}

/** Row keys by field name: the SQL subscript (1-based) of each key column. */
type Keys = ReadonlyMap<string, number>

const keyOf = (p: Params, keys: Keys, field: string) => `s.nums[${p.add(keys.get(field)!, "int4")}]`

const isNumber = (v: unknown): v is number => typeof v === "number"
/**
 * A number bound as text read as float8: the client would bind 3 as an integer and 2.5 as a double
 * (and refuses an array of both). `String` prints the shortest text that reads back as that double.
 */
const float8 = (n: number) => String(n)

/**
 * The predicate on the row keys, or undefined when the keys cannot answer it exactly. A key is
 * NULL for a JSON null and for a missing field alike, so only predicates that treat those two the
 * same qualify: comparisons with numbers (null never matches, as with jsonb), `ne` a number
 * (both match), `in` numbers, `exists`. `eq null`, strings, `contains` read the document.
 */
const keyPredicate = (p: Params, keys: Keys, predicate: Predicate): string | undefined => {
  if (!keys.has(predicate.field)) return undefined
  const { op, value } = predicate
  switch (op) {
    case "eq":
    case "ne":
    case "lt":
    case "lte":
    case "gt":
    case "gte": {
      if (!isNumber(value)) return undefined
      const k = keyOf(p, keys, predicate.field)
      const sqlOp = op === "eq" ? "=" : op === "ne" ? "IS DISTINCT FROM" : comparison[op]
      return `(${k} ${sqlOp} ${p.add(float8(value), "float8")})`
    }
    case "in": {
      if (!Array.isArray(value) || !value.every(isNumber)) return undefined
      return `(${keyOf(p, keys, predicate.field)} = ANY(${p.add(`{${value.map(float8).join(",")}}`, "float8[]")}))`
    }
    case "exists":
      return `(${keyOf(p, keys, predicate.field)} IS ${predicate.value ? "NOT " : ""}NULL)`
    case "contains":
      return undefined
  }
}

/** Whether the row keys answer the whole filter and sort (see `keyPredicate`; null-only columns sort as ties). */
const keysAnswer = (keys: Keys, query: RowQuery, columns: ReadonlyMap<string, Column>) =>
  query.filter.every((predicate) => keyPredicate(new Params(), keys, predicate) !== undefined) &&
  query.sort.every((key) => keys.has(key.field) || singleType(columns, key.field) === "null")

/**
 * FROM + WHERE over the search rows alone (the row-keys plan): the predicates are `keyPredicate`s.
 * Only called when `keysAnswer`.
 */
const keysWhereClause = (p: Params, target: TableTarget, query: RowQuery, keys: Keys) => {
  const conditions = [`s.content_id = ${p.add(target.contentId, "int8")}`]
  if (query.rowStart !== undefined) conditions.push(`s.row_no >= ${p.add(query.rowStart, "int8")}`)
  if (query.rowEnd !== undefined) conditions.push(`s.row_no < ${p.add(query.rowEnd, "int8")}`)
  for (const predicate of query.filter) conditions.push(keyPredicate(p, keys, predicate)!)
  if (query.search !== undefined) conditions.push(`strpos(s.search, ${p.add(query.search, "text")}) > 0`)
  return `FROM artifact_row_search s WHERE ${conditions.join(" AND ")}`
}

/** FROM + WHERE shared by the page and the count. */
const whereClause = (p: Params, target: TableTarget, query: RowQuery, columns: ReadonlyMap<string, Column>) => {
  const conditions = [`r.content_id = ${p.add(target.contentId, "int8")}`]
  if (query.rowStart !== undefined) conditions.push(`r.row_no >= ${p.add(query.rowStart, "int8")}`)
  if (query.rowEnd !== undefined) conditions.push(`r.row_no < ${p.add(query.rowEnd, "int8")}`)
  for (const predicate of query.filter) conditions.push(predicateSql(p, "r.data", predicate, columns))
  let from = "artifact_rows r"
  if (query.search !== undefined) {
    from += " JOIN artifact_row_search s ON s.content_id = r.content_id AND s.row_no = r.row_no"
    conditions.push(`strpos(s.search, ${p.add(query.search, "text")}) > 0`)
  }
  return `FROM ${from} WHERE ${conditions.join(" AND ")}`
}

/** The returned row's JSON text: selected fields in `select` order, else every key in column order. */
const projection = (p: Params, doc: string, target: TableTarget, query: RowQuery) => {
  if (query.select !== undefined) {
    if (query.select.length === 0) return `'{}'`
    const values = query.select.map((field, i) => `(${i}, ${p.add(field, "text")}, ${accessor(p, doc, field)})`).join(", ")
    return `(SELECT COALESCE(json_object_agg(s.k, s.v ORDER BY s.o), '{}'::json) FROM (VALUES ${values}) AS s(o, k, v) WHERE s.v IS NOT NULL)::text`
  }
  if (target.allColumnsListed && target.columns.length <= Limits.maxOrderedColumns) {
    const columns = p.add(target.columns.map((c) => c.name), "text[]")
    return `(SELECT COALESCE(json_object_agg(c.k, ${doc} -> c.k ORDER BY c.o), '{}'::json)
      FROM unnest(${columns}) WITH ORDINALITY AS c(k, o) WHERE ${doc} -> c.k IS NOT NULL)::text`
  }
  return `(${doc})::text`
}

/** The row count a query matches when nothing filters: the rows inside `range`. */
const rowsInRange = (rowCount: number, query: RowQuery) => {
  const start = Math.min(query.rowStart ?? 0, rowCount)
  const end = Math.min(query.rowEnd ?? rowCount, rowCount)
  return Math.max(0, end - start)
}

export const compileRowQuery = (target: TableTarget, query: RowQuery): CompiledRowQuery => {
  const columns = new Map(target.columns.map((c) => [c.name, c]))
  const filtered = query.filter.length > 0 || query.search !== undefined
  const keys: Keys = new Map((target.keyColumns ?? []).map((name, i) => [name, i + 1]))
  // Without a filter, search or sort, the documents' primary-key range is the cheapest read.
  const byKeys = (filtered || query.sort.length > 0) && keysAnswer(keys, query, columns)

  let count: SqlStatement | undefined
  if (filtered) {
    const p = new Params()
    const where = byKeys ? keysWhereClause(p, target, query, keys) : whereClause(p, target, query, columns)
    count = { text: `SELECT count(*)::int4 AS total ${where}`, params: p.values }
  }

  let page: SqlStatement | undefined
  if (query.limit > 0 && byKeys) {
    // The page's row numbers from the narrow rows, then only those rows' documents.
    const p = new Params()
    const where = keysWhereClause(p, target, query, keys)
    const terms = query.sort.filter((key) => keys.has(key.field)).map((key) => ({ expr: keyOf(p, keys, key.field), dir: key.dir === "desc" ? "DESC" : "ASC" }))
    const keyNames = terms.map((t, i) => `${t.expr} AS k${i}`)
    const innerOrder = [...terms.map((t, i) => `k${i} ${t.dir} NULLS LAST`), "s.row_no"]
    const outerOrder = [...terms.map((t, i) => `p.k${i} ${t.dir} NULLS LAST`), "p.row_no"]
    const window = `LIMIT ${p.add(query.limit, "int8")} OFFSET ${p.add(query.offset, "int8")}`
    const inner = `SELECT ${["s.row_no", ...keyNames].join(", ")} ${where} ORDER BY ${innerOrder.join(", ")} ${window}`
    const doc = query.original ? "(r.data || COALESCE(r.original, '{}'::jsonb))" : "r.data"
    const text = `SELECT ${projection(p, doc, target, query)} AS row FROM (${inner}) p
      JOIN artifact_rows r ON r.content_id = ${p.add(target.contentId, "int8")} AND r.row_no = p.row_no ORDER BY ${outerOrder.join(", ")}`
    page = { text, params: p.values }
  } else if (query.limit > 0) {
    const p = new Params()
    const where = whereClause(p, target, query, columns)
    const terms = query.sort.flatMap((key) => sortTerms(p, "r.data", key, columns))
    const keys = terms.map((t, i) => `${t.expr} AS k${i}`)
    const innerOrder = [...terms.map((t, i) => `k${i} ${t.dir} NULLS LAST`), "r.row_no"]
    const outerOrder = [...terms.map((t, i) => `p.k${i} ${t.dir} NULLS LAST`), "p.row_no"]
    const doc = query.original ? "(p.d || COALESCE(p.o, '{}'::jsonb))" : "p.d"
    const window = `LIMIT ${p.add(query.limit, "int8")} OFFSET ${p.add(query.offset, "int8")}`
    const inner = `SELECT ${["r.row_no", "r.data AS d", "r.original AS o", ...keys].join(", ")} ${where} ORDER BY ${innerOrder.join(", ")} ${window}`
    const text = `SELECT ${projection(p, doc, target, query)} AS row FROM (${inner}) p ORDER BY ${outerOrder.join(", ")}`
    page = { text, params: p.values }
  }

  return { page, count, knownTotal: filtered ? undefined : rowsInRange(target.rowCount, query) }
}

export interface CompiledTextQuery {
  /** Absent for an empty range. Result: one row with `slice` (bytea). */
  readonly statement: SqlStatement | undefined
  /** The byte range asked for, clamped to the text. */
  readonly start: number
  readonly end: number
  /** Where the answer stops (at most `maxTextSlice` past `start`). */
  readonly cut: number
  /** The range fetched: `[start, fetchEnd)`, up to 3 bytes past `cut` to finish a character. */
  readonly fetchEnd: number
}

/** A byte range of text content, sliced in SQL from the chunks that hold it. */
export const compileTextQuery = (contentId: string, sizeBytes: number, query: TextQuery): CompiledTextQuery => {
  const start = Math.min(query.byteStart, sizeBytes)
  const end = Math.min(query.byteEnd ?? sizeBytes, sizeBytes)
  const cut = Math.min(end, start + Limits.maxTextSlice)
  const fetchEnd = Math.min(cut + 3, sizeBytes)
  if (cut <= start) return { statement: undefined, start, end, cut, fetchEnd }
  const C = Limits.chunkBytes
  const first = Math.floor(start / C)
  const last = Math.floor((fetchEnd - 1) / C)
  const p = new Params()
  const text = `SELECT substring(string_agg(c.bytes, ''::bytea ORDER BY c.chunk_no) FROM ${p.add(start - first * C + 1, "int4")} FOR ${p.add(fetchEnd - start, "int4")}) AS slice
    FROM artifact_chunks c WHERE c.content_id = ${p.add(contentId, "int8")} AND c.chunk_no BETWEEN ${p.add(first, "int4")} AND ${p.add(last, "int4")}`
  return { statement: { text, params: p.values }, start, end, cut, fetchEnd }
}

const isContinuation = (byte: number) => (byte & 0xc0) === 0x80

/**
 * The whole characters of a fetched slice: those whose first byte lies in `[start, cut)`. Returns
 * the text and the byte range it covers.
 */
export const trimToCharacters = (bytes: Uint8Array, compiled: CompiledTextQuery) => {
  let from = 0
  while (from < bytes.length && isContinuation(bytes[from])) from++
  let to = Math.min(compiled.cut - compiled.start, bytes.length)
  if (to < from) to = from
  while (to < bytes.length && isContinuation(bytes[to])) to++
  return {
    text: Buffer.from(bytes.buffer, bytes.byteOffset + from, to - from).toString("utf8"),
    byteStart: compiled.start + from,
    byteEnd: compiled.start + to
  }
}
