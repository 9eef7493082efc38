/**
 * The value rules every part of the artifacts surface agrees on: JSON types, how a field is read
 * from a row, how values compare and order. The SQL compiler (`query-compiler.ts`) and the plain
 * TypeScript evaluator (`query-reference.ts`) both follow these, and a property test holds them
 * to it.
 */
import { isPlainObject, type Json, type JsonObject, jsonType } from "../util/json.ts"

export type Row = JsonObject

/**
 * A row's value at `field`: the top-level key of that exact name when the row has it; otherwise,
 * for a name with dots, the path through nested objects (`user.name`). Arrays are not indexed.
 * `undefined` means missing.
 */
export const readField = (row: Row, field: string): Json | undefined => {
  if (Object.hasOwn(row, field)) return row[field]
  if (!field.includes(".")) return undefined
  let current: Json | undefined = row
  for (const segment of field.split(".")) {
    if (!isPlainObject(current) || !Object.hasOwn(current, segment)) return undefined
    current = current[segment]
  }
  return current
}

/** Strings order by Unicode code point (PostgreSQL `COLLATE "C"` on UTF-8), not UTF-16 unit. */
export const compareStrings = (a: string, b: string): number => {
  const length = Math.min(a.length, b.length)
  for (let i = 0; i < length; i++) {
    const x = a.charCodeAt(i)
    const y = b.charCodeAt(i)
    if (x === y) continue
    // A surrogate (an astral code point) sorts above every BMP unit, as its code point does.
    const xs = x >= 0xd800 && x <= 0xdfff
    const ys = y >= 0xd800 && y <= 0xdfff
    if (xs !== ys) return xs ? 1 : -1
    return x < y ? -1 : 1
  }
  return a.length === b.length ? 0 : a.length < b.length ? -1 : 1
}

/** JSON equality: numbers by value, objects regardless of key order, arrays element by element. */
export const jsonEquals = (a: Json, b: Json): boolean => {
  if (a === b) return true
  const ta = jsonType(a)
  if (ta !== jsonType(b)) return false
  if (ta === "array") {
    const x = a as ReadonlyArray<Json>
    const y = b as ReadonlyArray<Json>
    return x.length === y.length && x.every((v, i) => jsonEquals(v, y[i]))
  }
  if (ta === "object") {
    const x = a as Row
    const y = b as Row
    const keys = Object.keys(x)
    return keys.length === Object.keys(y).length && keys.every((k) => Object.hasOwn(y, k) && jsonEquals(x[k], y[k]))
  }
  return false
}

/**
 * Sort rank of a value: numbers, then strings, then booleans, then arrays and objects (equal to
 * each other), then null and missing — last in both directions.
 */
const sortRank = (value: Json | undefined): number => {
  if (value === undefined || value === null) return 4
  switch (jsonType(value)) {
    case "number":
      return 0
    case "string":
      return 1
    case "boolean":
      return 2
    default:
      return 3
  }
}

/** Compares two values of one field for an ascending sort (the direction applies within a rank). */
export const compareForSort = (a: Json | undefined, b: Json | undefined, descending: boolean): number => {
  const ra = sortRank(a)
  const rb = sortRank(b)
  if (ra !== rb) return ra - rb
  let c = 0
  if (ra === 0) c = (a as number) < (b as number) ? -1 : (a as number) > (b as number) ? 1 : 0
  else if (ra === 1) c = compareStrings(a as string, b as string)
  else if (ra === 2) c = a === b ? 0 : a === false ? -1 : 1
  return descending ? -c : c
}

/** Numbers as CSV and query strings write them: no spaces, no leading zeros, no hex, no `Infinity`. */
const NUMBER_TEXT = /^[+-]?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?$|^[+-]?\.\d+(?:[eE][+-]?\d+)?$|^[+-]?(?:0|[1-9]\d*)\.(?:[eE][+-]?\d+)?$/

/**
 * The number a text denotes, or undefined. Integers beyond 2^53 are not numbers here (they would
 * lose digits, like long ids), and neither is anything with leading zeros (zip codes).
 */
export const numberFromText = (text: string): number | undefined => {
  if (!NUMBER_TEXT.test(text)) return undefined
  const n = Number(text)
  if (!Number.isFinite(n)) return undefined
  if (Number.isInteger(n) && !Number.isSafeInteger(n) && /^[+-]?\d+$/.test(text)) return undefined
  return n
}

export const booleanFromText = (text: string): boolean | undefined => {
  const lower = text.toLowerCase()
  return lower === "true" ? true : lower === "false" ? false : undefined
}

/** Serialized size of a value in UTF-8 bytes. */
export const serializedBytes = (value: Json) => Buffer.byteLength(JSON.stringify(value))

/**
 * True when a JSON text carries a character PostgreSQL's jsonb cannot hold: U+0000 or an unpaired
 * surrogate, which `JSON.stringify` writes as `\u0000` / `\udXXX` escapes (an odd run of
 * backslashes before the `u` means an escape, an even one a literal backslash).
 */
export const hasUnstorableEscape = (jsonText: string): boolean =>
  /(?:^|[^\\])(?:\\\\)*\\u(?:0000|d[89a-f][0-9a-f]{2})/i.test(jsonText)

const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/

/** Whether a string has a UTF-8 form (no unpaired surrogate); `String.isWellFormed` in ES2024. */
export const isWellFormed = (text: string) => !LONE_SURROGATE.test(text)

/**
 * Whether a value nests arrays/objects deeper than `max` levels. Stops descending at the limit,
 * so it cannot overflow the stack the way `JSON.stringify` does on very deep values.
 */
export const nestedDeeperThan = (value: unknown, max: number): boolean => {
  if (typeof value !== "object" || value === null) return false
  if (max <= 0) return true
  for (const child of Array.isArray(value) ? value : Object.values(value)) {
    if (nestedDeeperThan(child, max - 1)) return true
  }
  return false
}
