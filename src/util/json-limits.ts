/**
 * What a parsed JSON body may contain, checked before it reaches code that recurses over it
 * (`JSON.stringify`, merge patches, Schema) or a database that refuses some of it.
 *
 * - Depth: every body is capped at `MAX_JSON_DEPTH` levels of nesting. `JSON.parse` accepts a
 *   million levels, but `JSON.stringify` overflows the stack at a few thousand, and the gateway
 *   stringifies states, tool schemas, response formats and run events. 128 is far more than any
 *   real JSON Schema or document needs (OpenAI's strict schemas allow 10 levels).
 * - Storable: what goes into PostgreSQL must be text PostgreSQL can hold: no NUL (`\u0000`, which
 *   `text` and `jsonb` refuse), no lone UTF-16 surrogate (`"\ud800"`: jsonb refuses it, `text`
 *   would silently turn it into U+FFFD), no number JSON cannot carry (`1e999` parses to Infinity),
 *   and at most `MAX_STORED_JSON_BYTES` in the form PostgreSQL stores and sends back — jsonb prints
 *   numbers in full (`1e300` comes back as 301 digits), so a small body can grow a lot.
 *
 * The walks are iterative (an explicit stack): the value being checked may be deeper than the
 * call stack.
 */
import { Effect } from "effect"
import { InvalidRequest, PayloadTooLarge } from "../errors.ts"
import { formatPath } from "./schema-issue.ts"
import { runAtOnce, runInSlices, STRING_SLICE, stringSlices } from "./slices.ts"

/** Deepest nesting accepted in a request body (the body itself is level 1). */
export const MAX_JSON_DEPTH = 128

/**
 * Most JSON values (objects, arrays, strings, numbers, booleans, nulls; keys not counted) in one
 * request body: 400 beyond. Every pass over a request (Schema decode, the token bound, the
 * upstream translation, `JSON.stringify`) runs on the event loop in time linear in its values;
 * this bounds how long any of them holds it (a few ms each at the limit, where 32 MiB of tiny
 * messages took seconds). A value takes at least two bytes (`0,`), so only a body larger than
 * `LARGE_BODY_BYTES` can exceed it, and only the sliced parser those go through
 * (`sliced-json.ts`) counts. Real requests stay far below it: a 2,000-turn agent conversation
 * with tool calls is ~30,000 values; OpenAI caps `tools` and each message's `tool_calls` at 128.
 */
export const MAX_JSON_VALUES = 65_536

/** Bodies larger than this (128 KiB) are parsed in slices (`sliced-json.ts`); smaller ones by `JSON.parse`. */
export const LARGE_BODY_BYTES = 2 * MAX_JSON_VALUES

/**
 * Longest object key in a request body, in characters. Setting a key on an object makes V8 hash
 * it and copy it into its string table in one step that no slice can split: an 8 MB key held the
 * event loop 67–80 ms on a slow VM. No real key comes near it (OpenAI's metadata keys are at most
 * 64 characters). A body parsed at once (at most `LARGE_BODY_BYTES`) cannot hold a longer one, so
 * only the sliced parser (`sliced-json.ts`) checks.
 */
export const MAX_JSON_KEY_CHARS = LARGE_BODY_BYTES

/** Largest JSON document the gateway stores, measured as PostgreSQL prints it back (16 MiB). */
export const MAX_STORED_JSON_BYTES = 16 * 1024 * 1024

export type JsonProblem =
  | { readonly kind: "depth"; readonly path: ReadonlyArray<PropertyKey> }
  | { readonly kind: "nul" | "surrogate" | "number"; readonly path: ReadonlyArray<PropertyKey> }
  | { readonly kind: "size"; readonly bytes: number }

/** A value to visit; the path is rebuilt from the parent links only when a problem is found. */
interface Frame {
  readonly value: unknown
  readonly key: PropertyKey | undefined
  readonly parent: Frame | undefined
  readonly depth: number
}

const pathOf = (frame: Frame | undefined): ReadonlyArray<PropertyKey> => {
  const path: Array<PropertyKey> = []
  for (let f = frame; f !== undefined && f.key !== undefined; f = f.parent) path.push(f.key)
  return path.reverse()
}

const isContainer = (value: unknown): value is object => typeof value === "object" && value !== null

/** Whether `value` nests deeper than `maxDepth`: parallel stacks, no allocation per node. */
const nestsDeeper = (value: object, maxDepth: number): boolean => {
  const values: Array<object> = [value]
  const depths: Array<number> = [0]
  while (values.length > 0) {
    const current = values.pop()!
    const depth = depths.pop()!
    if (depth >= maxDepth) return true
    if (Array.isArray(current)) {
      for (let i = 0; i < current.length; i++) {
        if (isContainer(current[i])) {
          values.push(current[i])
          depths.push(depth + 1)
        }
      }
    } else {
      for (const key in current) {
        const child = (current as Record<string, unknown>)[key]
        if (isContainer(child)) {
          values.push(child)
          depths.push(depth + 1)
        }
      }
    }
  }
  return false
}

/** The path to the first container deeper than `maxDepth` (only walked once one is known to exist). */
const deepPath = (value: object, maxDepth: number): ReadonlyArray<PropertyKey> => {
  const stack: Array<Frame> = [{ value, key: undefined, parent: undefined, depth: 0 }]
  while (stack.length > 0) {
    const frame = stack.pop()!
    if (frame.depth >= maxDepth) return pathOf(frame)
    const current = frame.value as object
    const entries: Array<[PropertyKey, unknown]> = Array.isArray(current) ? current.map((v, i) => [i, v]) : Object.entries(current)
    for (let i = entries.length - 1; i >= 0; i--) {
      const [key, child] = entries[i]
      if (isContainer(child)) stack.push({ value: child, key, parent: frame, depth: frame.depth + 1 })
    }
  }
  return []
}

/** Whether `value` nests deeper than `maxDepth` levels (a walk without allocation per node). */
export const isTooDeep = (value: unknown, maxDepth: number = MAX_JSON_DEPTH): boolean => isContainer(value) && nestsDeeper(value, maxDepth)

/** The first place where `value` nests deeper than `maxDepth` levels, or undefined. */
export const findTooDeep = (value: unknown, maxDepth: number = MAX_JSON_DEPTH): JsonProblem | undefined =>
  isTooDeep(value, maxDepth) ? { kind: "depth", path: deepPath(value as object, maxDepth) } : undefined

/**
 * A string PostgreSQL text and jsonb can hold: no NUL, no lone surrogate. `isWellFormed` is the
 * engine's own check (none at all for a string V8 keeps one byte per character); the `u`-mode
 * regex it replaces took 70–125 ms on a 16 MiB string on a slow VM, in one turn of the event loop.
 */
export const textProblem = (s: string): "nul" | "surrogate" | undefined =>
  s.includes("\u0000") ? "nul" : s.isWellFormed() ? undefined : "surrogate"

const NEEDS_ESCAPE = /["\\\u0000-\u001f]/

/** A string's size in jsonb's printed form: UTF-8, quoted, escaped like JSON.stringify does. */
const printedStringBytes = (s: string): number =>
  NEEDS_ESCAPE.test(s) ? Buffer.byteLength(JSON.stringify(s)) : Buffer.byteLength(s) + 2

/** Upper bound of a number's size as jsonb prints it: numerics in full, never in exponent form. */
const printedNumberBytes = (n: number): number => {
  const text = String(n)
  const e = text.indexOf("e")
  return e === -1 ? text.length : text.length + Math.abs(Number(text.slice(e + 1))) + 2
}

type Leaf = { readonly kind: "nul" | "surrogate" | "number" } | number

/** A primitive's printed size, or what makes it unstorable. */
const leaf = (value: unknown): Leaf => {
  switch (typeof value) {
    case "string": {
      const problem = textProblem(value)
      return problem === undefined ? printedStringBytes(value) : { kind: problem }
    }
    case "number":
      return Number.isFinite(value) ? printedNumberBytes(value) : { kind: "number" }
    case "boolean":
      return 5
    default:
      return 4 // null (undefined does not occur in parsed JSON)
  }
}

/** Work (characters, plus a few per value) between two points where the walk may pause. */
const UNITS_PER_STEP = 64 * 1024

/** A long string's printed size, or its problem, checked slice by slice with a pause between slices. */
function* longString(s: string): Generator<void, Leaf> {
  let bytes = 2
  for (const slice of stringSlices(s)) {
    const problem = textProblem(slice)
    if (problem !== undefined) return { kind: problem }
    bytes += printedStringBytes(slice) - 2
    yield
  }
  return bytes
}

/**
 * The walk behind `findUnstorable` and `requireStorable`: the first reason `value` cannot be
 * stored as given, or undefined. Object keys are checked like strings; paths are property paths
 * from the value's root; it stops as soon as the size is exceeded. It pauses (yields) after about
 * `UNITS_PER_STEP` characters of work, so that a caller can spread a 16 MiB document over many
 * turns of the event loop (`runInSlices`): checked at once it took 90–230 ms on a slow VM.
 */
function* unstorable(value: unknown, maxBytes: number): Generator<void, JsonProblem | undefined> {
  if (!isContainer(value)) {
    const size = typeof value === "string" && value.length > STRING_SLICE ? yield* longString(value) : leaf(value)
    return typeof size === "number" ? (size > maxBytes ? { kind: "size", bytes: size } : undefined) : { kind: size.kind, path: [] }
  }
  let bytes = 0
  let units = 0
  const stack: Array<Frame> = [{ value, key: undefined, parent: undefined, depth: 0 }]
  while (stack.length > 0) {
    const frame = stack.pop()!
    const current = frame.value as object
    const depth = frame.depth + 1
    // Leaves are checked in document order; containers are pushed in reverse to be visited so.
    const containers: Array<Frame> = []
    const keys = Array.isArray(current) ? undefined : Object.keys(current)
    const count = keys === undefined ? (current as ReadonlyArray<unknown>).length : keys.length
    bytes += 2 + (keys === undefined ? 2 * count : 0)
    for (let i = 0; i < count; i++) {
      const key: string | number = keys === undefined ? i : keys[i]
      if (typeof key === "string") {
        const keySize = key.length > STRING_SLICE ? yield* longString(key) : leaf(key)
        if (typeof keySize !== "number") return { kind: keySize.kind, path: [...pathOf(frame), key] }
        bytes += keySize + 4
        units += key.length
      }
      const child = (current as Record<string | number, unknown>)[key]
      if (isContainer(child)) {
        containers.push({ value: child, key, parent: frame, depth })
        units += 4
        continue
      }
      // Short strings are checked at once, without a generator of their own (most leaves).
      const size = typeof child === "string" && child.length > STRING_SLICE ? yield* longString(child) : leaf(child)
      if (typeof size !== "number") return { kind: size.kind, path: [...pathOf(frame), key] }
      bytes += size
      units += 4 + (typeof child === "string" ? child.length : 0)
      if (units >= UNITS_PER_STEP) {
        if (bytes > maxBytes) return { kind: "size", bytes }
        units = 0
        yield
      }
    }
    for (let i = containers.length - 1; i >= 0; i--) stack.push(containers[i])
    if (bytes > maxBytes) return { kind: "size", bytes }
  }
  return undefined
}

/** The first reason `value` cannot be stored as given, or undefined, checked at once (see `unstorable`). */
export const findUnstorable = (value: unknown, maxBytes: number = MAX_STORED_JSON_BYTES): JsonProblem | undefined =>
  runAtOnce(unstorable(value, maxBytes))

/** `findUnstorable` in slices that give the event loop back (`runInSlices`): for a large value. */
export const findUnstorableInSlices = (value: unknown, maxBytes: number = MAX_STORED_JSON_BYTES): Effect.Effect<JsonProblem | undefined> =>
  runInSlices(unstorable(value, maxBytes))

/** `tools[0].input_schema.properties…`: a path shortened for a message. */
const shortPath = (path: ReadonlyArray<PropertyKey>) => formatPath(path.slice(0, 4)) + (path.length > 4 ? "…" : "")

/** What a value deeper than `MAX_JSON_DEPTH` is said to be, in every 400 about it. */
export const NESTED_TOO_DEEP = `nested deeper than the limit of ${MAX_JSON_DEPTH} levels`

/** The 400 for a container at `path` deeper than `MAX_JSON_DEPTH`, naming the top-level field it is in. */
export const tooDeep = (path: ReadonlyArray<PropertyKey>): InvalidRequest => {
  const [top] = path
  const limit = NESTED_TOO_DEEP
  return top === undefined || typeof top === "number"
    ? new InvalidRequest({ message: `The request body is ${limit} (at ${shortPath(path)})` })
    : new InvalidRequest({ message: `${formatPath([top])}: ${limit} (at ${shortPath(path)})`, param: formatPath([top]) })
}

/** What a key longer than `MAX_JSON_KEY_CHARS` is said to be, in every 400 about it. */
export const KEY_TOO_LONG = `an object key longer than the limit of ${MAX_JSON_KEY_CHARS} characters`

/** The 400 for a key longer than `MAX_JSON_KEY_CHARS` in the object at `path`, naming the top-level field it is in. */
export const keyTooLong = (path: ReadonlyArray<PropertyKey>): InvalidRequest => {
  const [top] = path
  const where = path.length === 0 ? "" : ` (in ${shortPath(path)})`
  return top === undefined || typeof top === "number"
    ? new InvalidRequest({ message: `The request body has ${KEY_TOO_LONG}${where}` })
    : new InvalidRequest({ message: `${formatPath([top])}: ${KEY_TOO_LONG}${where}`, param: formatPath([top]) })
}

/** 400 when the value nests deeper than `MAX_JSON_DEPTH`, naming the top-level field it is in. */
export const requireShallow = (value: unknown): Effect.Effect<void, InvalidRequest> => {
  const problem = findTooDeep(value)
  if (problem === undefined || problem.kind !== "depth") return Effect.void
  return Effect.fail(tooDeep(problem.path))
}

/**
 * 400 naming the field for a string the store refuses (NUL, an unpaired surrogate) or a number
 * out of range; 413 for a value larger than the store keeps. `field` prefixes the paths when the
 * value is one field of the body.
 */
export const requireStorable = (value: unknown, field?: string): Effect.Effect<void, InvalidRequest | PayloadTooLarge> =>
  Effect.flatMap(findUnstorableInSlices(value), (problem) => problem === undefined ? Effect.void : storableFailure(problem, field))

const storableFailure = (problem: JsonProblem, field: string | undefined): Effect.Effect<void, InvalidRequest | PayloadTooLarge> => {
  const where = (path: ReadonlyArray<PropertyKey>) => {
    const inner = formatPath(path)
    return field === undefined ? inner : inner === "" ? field : inner.startsWith("[") ? field + inner : `${field}.${inner}`
  }
  switch (problem.kind) {
    case "size":
      return Effect.fail(new PayloadTooLarge({
        limitBytes: MAX_STORED_JSON_BYTES,
        message: `${field ?? "The request body"} would take more than ${MAX_STORED_JSON_BYTES} bytes to store; the store keeps at most that much per document`,
        ...(field === undefined ? {} : { param: field })
      }))
    case "depth":
      return Effect.void
    default: {
      const path = where(problem.path)
      const what = problem.kind === "nul"
        ? "contains a NUL character (\\u0000), which cannot be stored"
        : problem.kind === "surrogate"
        ? "contains an unpaired UTF-16 surrogate, which is not valid Unicode"
        : "is a number out of range"
      return Effect.fail(new InvalidRequest({ message: path === "" ? `The request body ${what}` : `${path}: ${what}`, ...(path === "" ? {} : { param: path }) }))
    }
  }
}

/**
 * Largest protocol message the SQL client reads (the driver's default is 16 MiB). A row is one
 * message, and a row may hold a few documents of up to `MAX_STORED_JSON_BYTES` each (a run's
 * input, tools and metadata), so the client must read several times that: a row it cannot read
 * back would be stored and then unreadable.
 */
export const MAX_SQL_MESSAGE_BYTES = 4 * MAX_STORED_JSON_BYTES

/**
 * The most a page of stored documents brings past its first row, where a page stops at a byte
 * budget as well as a row limit (a run's log, run lists): the SQL client decodes a statement's whole
 * result at once, in memory and in one turn of the event loop, and a page of 16 MiB documents had
 * no bound but its row limit.
 */
export const PAGE_BUDGET_BYTES = 4 * 1024 * 1024

/** A JSON text shorter than this is parsed at once without counting its values first. */
const COUNTED_TEXT_UNITS = 1024 * 1024

/**
 * Whether a JSON text (one streamed event's data, parsed at once) holds more than `limit` values,
 * found without parsing it: containers and commas outside strings, counted by a scan that
 * stops at the limit — ~1 ns a character, where `JSON.parse` of 15 MiB of tiny values held the
 * event loop for a second on a slow VM. A text under 1 Mi characters is not scanned: it holds at
 * most ~0.5M values, and its parse is milliseconds. An overcount for malformed text is harmless:
 * it fails to parse anyway.
 */
export const holdsMoreValues = (text: string, limit: number): boolean => {
  if (text.length < COUNTED_TEXT_UNITS) return false
  let values = 1
  let inString = false
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i)
    if (inString) {
      if (c === 0x5c) i++ // a backslash: the next character is escaped
      else if (c === 0x22) inString = false
      continue
    }
    if (c === 0x22) inString = true
    else if (c === 0x2c || c === 0x5b || c === 0x7b) {
      // `,` starts another value; `[` and `{` are one each
      if (++values > limit) return true
    }
  }
  return false
}
