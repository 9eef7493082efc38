/**
 * Generates a value that satisfies a JSON Schema, so the simulator's tool calls and structured
 * outputs validate against what the client declared.
 *
 * Supported: `type` (one or a list; `null` is chosen last), `const`, `enum`, `default`, `examples`,
 * `$ref` to local definitions (`#/$defs/…`, `#/definitions/…`), `anyOf`/`oneOf` (first branch that
 * is not `null`), `allOf` (merged), objects (`properties`, `required`, `minProperties`,
 * `additionalProperties` for required keys without a property schema), arrays (`items`,
 * `prefixItems`, `minItems`, `maxItems`, `uniqueItems` best effort), strings (`minLength`,
 * `maxLength`, `format` date-time/date/time/email/uri/uuid/ipv4/hostname), numbers and integers
 * (`minimum`, `maximum`, both `exclusive…` forms, `multipleOf`), booleans.
 * Not supported: `pattern` (ignored), `not`, conditionals (`if`/`then`), `dependentRequired`.
 * Optional properties are included with probability ½; beyond depth 6 only required ones are.
 *
 * Bounded whatever the schema says, so a hostile one cannot hang the process: `minLength` and
 * `minItems` above MAX_SAMPLE_LENGTH / MAX_SAMPLE_ITEMS are sampled at those (the value is then
 * shorter than asked), and a `$ref` cycle or nesting deeper than MAX_NESTING gives `null` there.
 */
import { isPlainObject, type Json, type JsonObject } from "../../util/json.ts"
import type { Prng } from "./prng.ts"
import { SIMULATOR_VOCABULARY } from "./words.ts"

const MAX_DEPTH = 6
const MAX_NESTING = 64
const MAX_SAMPLE_LENGTH = 4_096
const MAX_SAMPLE_ITEMS = 64

const num = (value: Json | undefined): number | undefined => (typeof value === "number" ? value : undefined)

export const sampleJsonSchema = (schema: Json, prng: Prng): Json => sample(schema, schema, prng, 0)

const resolveRef = (root: Json, ref: string): Json => {
  if (!ref.startsWith("#")) return {}
  let node: Json | undefined = root
  for (const raw of ref.slice(1).split("/").filter((part) => part !== "")) {
    const key = decodeURIComponent(raw).replaceAll("~1", "/").replaceAll("~0", "~")
    node = isPlainObject(node) ? node[key] : undefined
  }
  return node ?? {}
}

const propertiesOf = (schema: JsonObject): JsonObject => (isPlainObject(schema.properties) ? schema.properties : {})
const requiredOf = (schema: JsonObject): ReadonlyArray<Json> => (Array.isArray(schema.required) ? schema.required : [])

/** `allOf` branches merged into one schema: properties and `required` unioned, the rest last-wins. */
const mergeAll = (schemas: ReadonlyArray<Json>, root: Json): JsonObject => {
  let merged: Record<string, Json> = {}
  for (const branch of schemas) {
    const resolved = isPlainObject(branch) && typeof branch.$ref === "string" ? resolveRef(root, branch.$ref) : branch
    if (!isPlainObject(resolved)) continue
    const properties = { ...propertiesOf(merged), ...propertiesOf(resolved) }
    const required = [...requiredOf(merged), ...requiredOf(resolved)]
    merged = { ...merged, ...resolved, properties, required }
  }
  return merged
}

const typeOf = (schema: JsonObject): string => {
  const declared = schema.type
  if (typeof declared === "string") return declared
  if (Array.isArray(declared)) return declared.find((t): t is string => typeof t === "string" && t !== "null") ?? "null"
  if ("properties" in schema || "required" in schema) return "object"
  if ("items" in schema || "prefixItems" in schema) return "array"
  if ("minimum" in schema || "maximum" in schema || "multipleOf" in schema) return "number"
  return "string"
}

const sample = (schema: Json, root: Json, prng: Prng, depth: number): Json => {
  if (depth > MAX_NESTING) return null
  if (!isPlainObject(schema)) return schema === false ? null : "value"
  if (typeof schema.$ref === "string") return sample(resolveRef(root, schema.$ref), root, prng, depth + 1)
  if ("const" in schema) return schema.const
  if (Array.isArray(schema.enum) && schema.enum.length > 0) return prng.pick(schema.enum)
  if ("default" in schema) return schema.default
  if (Array.isArray(schema.examples) && schema.examples.length > 0) return schema.examples[0]
  const alternatives = Array.isArray(schema.anyOf) ? schema.anyOf : Array.isArray(schema.oneOf) ? schema.oneOf : undefined
  if (alternatives !== undefined && alternatives.length > 0) {
    const branch = alternatives.find((b) => !(isPlainObject(b) && b.type === "null")) ?? alternatives[0]
    return sample(branch, root, prng, depth + 1)
  }
  if (Array.isArray(schema.allOf)) {
    const { allOf: _, ...rest } = schema
    return sample(mergeAll([rest, ...schema.allOf], root), root, prng, depth + 1)
  }
  switch (typeOf(schema)) {
    case "object":
      return sampleObject(schema, root, prng, depth)
    case "array":
      return sampleArray(schema, root, prng, depth)
    case "integer":
      return sampleNumber(schema, prng, true)
    case "number":
      return sampleNumber(schema, prng, false)
    case "boolean":
      return prng.chance(0.5)
    case "null":
      return null
    default:
      return sampleString(schema, prng)
  }
}

const sampleObject = (schema: JsonObject, root: Json, prng: Prng, depth: number): Json => {
  const properties = propertiesOf(schema)
  const required = new Set(requiredOf(schema).filter((key) => typeof key === "string"))
  const minProperties = num(schema.minProperties) ?? 0
  const out: Record<string, Json> = {}
  const optional = Object.keys(properties).filter((key) => !required.has(key))
  const included = new Set(optional.filter(() => depth < MAX_DEPTH && prng.chance(0.5)))
  // Top up with optional properties, in declaration order, until minProperties is met.
  for (const key of optional) if (required.size + included.size < minProperties) included.add(key)
  for (const key of Object.keys(properties)) {
    if (required.has(key) || included.has(key)) out[key] = sample(properties[key], root, prng, depth + 1)
  }
  for (const key of required) {
    if (!(key in out)) {
      const extra = isPlainObject(schema.additionalProperties) ? schema.additionalProperties : { type: "string" }
      out[key] = sample(extra, root, prng, depth + 1)
    }
  }
  return out
}

const sampleArray = (schema: JsonObject, root: Json, prng: Prng, depth: number): Json => {
  const prefix = Array.isArray(schema.prefixItems) ? schema.prefixItems : Array.isArray(schema.items) ? schema.items : []
  const itemSchema: Json = isPlainObject(schema.items) ? schema.items : {}
  const min = Math.min(num(schema.minItems) ?? 0, MAX_SAMPLE_ITEMS)
  const max = num(schema.maxItems) ?? Math.max(min, 3)
  const wanted = Math.min(MAX_SAMPLE_ITEMS, depth >= MAX_DEPTH ? min : Math.min(max, Math.max(min, prng.int(1, 2), prefix.length)))
  const out: Array<Json> = []
  const seen = new Set<string>()
  for (let attempt = 0; out.length < wanted && attempt < wanted * 10; attempt++) {
    const position = out.length
    const value = sample(position < prefix.length ? prefix[position] : itemSchema, root, prng, depth + 1)
    const key = JSON.stringify(value)
    if (schema.uniqueItems === true && seen.has(key)) continue
    seen.add(key)
    out.push(value)
  }
  return out
}

/** A number range wider than this (and than four steps) is a type's limits rather than the field's meaning (see `sampleNumber`). */
const WIDE_RANGE = 10_000

const sampleNumber = (schema: JsonObject, prng: Prng, integer: boolean): number => {
  const step = num(schema.multipleOf) ?? (integer ? 1 : 0.01)
  // Draft 4 writes exclusive bounds as booleans next to minimum/maximum; later drafts as numbers.
  const exclusiveMin = num(schema.exclusiveMinimum) ?? (schema.exclusiveMinimum === true ? num(schema.minimum) : undefined)
  const exclusiveMax = num(schema.exclusiveMaximum) ?? (schema.exclusiveMaximum === true ? num(schema.maximum) : undefined)
  const lowBound = exclusiveMin ?? num(schema.minimum)
  const highBound = exclusiveMax ?? num(schema.maximum)
  // Open ends: a range of 100 next to the given bound, starting at 0 when that is allowed.
  const givenLow = lowBound ?? (highBound === undefined || highBound >= 0 ? 0 : highBound - 100)
  const givenHigh = highBound ?? givenLow + 100
  // Bounds that only say what the type holds (zod's `.int()` gives ±2^53 − 1, other generators an
  // int32's range) made answers like `"age": -2683247850946559`, valid but unlike any model's: a
  // wide range is sampled in a window nearest to 0 (of 100, or two steps), inside the bounds.
  const span = Math.max(100, 2 * step)
  const wide = givenHigh - givenLow > Math.max(WIDE_RANGE, 4 * step)
  const low = wide ? Math.min(Math.max(0, givenLow), givenHigh - span) : givenLow
  const high = wide ? low + span : givenHigh
  // Pick a multiple of `step` strictly inside exclusive bounds and inside inclusive ones.
  let first = Math.ceil(low / step)
  if (exclusiveMin !== undefined && first * step <= exclusiveMin) first++
  let last = Math.floor(high / step)
  if (exclusiveMax !== undefined && last * step >= exclusiveMax) last--
  // No multiple of the step fits (a narrow range): the midpoint satisfies the bounds at least.
  if (last < first) return integer ? Math.ceil((low + high) / 2) : (low + high) / 2
  const value = prng.int(first, last) * step
  return integer ? Math.round(value) : Number(value.toFixed(6))
}

const sampleString = (schema: JsonObject, prng: Prng): string => {
  const word = (): string => prng.pick(SIMULATOR_VOCABULARY)
  switch (schema.format) {
    case "date-time":
      return `2024-0${prng.int(1, 9)}-1${prng.int(0, 9)}T10:${prng.int(10, 59)}:00Z`
    case "date":
      return `2024-0${prng.int(1, 9)}-1${prng.int(0, 9)}`
    case "time":
      return `10:${prng.int(10, 59)}:00`
    case "email":
      return `${word()}@example.com`
    case "uri":
    case "url":
      return `https://example.com/${word()}`
    case "uuid":
      return `${prng.hex(8)}-${prng.hex(4)}-4${prng.hex(3)}-a${prng.hex(3)}-${prng.hex(12)}`
    case "ipv4":
      return `192.0.2.${prng.int(1, 254)}`
    case "hostname":
      return `${word()}.example.com`
  }
  const minLength = Math.min(num(schema.minLength) ?? 0, MAX_SAMPLE_LENGTH)
  const maxLength = num(schema.maxLength) ?? Number.POSITIVE_INFINITY
  let text = Array.from({ length: prng.int(1, 3) }, word).join(" ")
  while (text.length < minLength) text += ` ${word()}`
  return text.slice(0, maxLength)
}
