/**
 * The artifact query evaluated in plain TypeScript over rows in memory: the reference the SQL
 * compiler is tested against (property test) and the baseline the benchmark compares with. The
 * gateway itself never runs it: queries run in the database.
 */
import type { Predicate, RowQuery } from "./query-input.ts"
import { compareForSort, compareStrings, jsonEquals, readField, type Row } from "./values.ts"
import type { Json } from "../util/json.ts"

export interface ReferenceResult {
  readonly rows: ReadonlyArray<Row>
  readonly totalMatched: number
}

const matches = (row: Row, predicate: Predicate): boolean => {
  const value = readField(row, predicate.field)
  switch (predicate.op) {
    case "eq":
      return value !== undefined && jsonEquals(value, predicate.value)
    case "ne":
      return value === undefined || !jsonEquals(value, predicate.value)
    case "lt":
    case "lte":
    case "gt":
    case "gte": {
      let c: number
      if (typeof predicate.value === "number") {
        if (typeof value !== "number") return false
        c = value < predicate.value ? -1 : value > predicate.value ? 1 : 0
      } else {
        if (typeof value !== "string") return false
        c = compareStrings(value, predicate.value)
      }
      return predicate.op === "lt" ? c < 0 : predicate.op === "lte" ? c <= 0 : predicate.op === "gt" ? c > 0 : c >= 0
    }
    case "contains":
      if (typeof value === "string") return typeof predicate.value === "string" && value.includes(predicate.value)
      if (Array.isArray(value)) return value.some((v: Json) => jsonEquals(v, predicate.value))
      return false
    case "in":
      return value !== undefined && predicate.value.some((v) => jsonEquals(value, v))
    case "exists":
      return (value !== undefined && value !== null) === predicate.value
  }
}

const project = (row: Row, select: ReadonlyArray<string> | undefined): Row => {
  if (select === undefined) return row
  const out: Record<string, Json> = {}
  for (const field of select) {
    const value = readField(row, field)
    if (value !== undefined) out[field] = value
  }
  return out
}

/**
 * `rows[i]` is row number `i`; `originals[i]` the original text of its cells where it differs
 * (CSV/TSV), as stored at upload.
 */
export const evaluate = (rows: ReadonlyArray<Row>, query: RowQuery, originals?: ReadonlyArray<Row | null>): ReferenceResult => {
  const start = query.rowStart ?? 0
  const end = Math.min(query.rowEnd ?? rows.length, rows.length)
  const matched: Array<number> = []
  for (let i = start; i < end; i++) {
    const row = rows[i]
    if (!query.filter.every((p) => matches(row, p))) continue
    if (query.search !== undefined && !JSON.stringify(row).toLowerCase().includes(query.search)) continue
    matched.push(i)
  }
  if (query.sort.length > 0) {
    matched.sort((a, b) => {
      for (const key of query.sort) {
        const c = compareForSort(readField(rows[a], key.field), readField(rows[b], key.field), key.dir === "desc")
        if (c !== 0) return c
      }
      return a - b
    })
  }
  const page = matched.slice(query.offset, query.offset + query.limit).map((i) => {
    const row = query.original && originals?.[i] ? { ...rows[i], ...originals[i] } : rows[i]
    return project(row, query.select)
  })
  return { rows: page, totalMatched: matched.length }
}
