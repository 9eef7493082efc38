/**
 * A tiny, independent JSON Schema validator for tests: the keywords the simulator claims to
 * satisfy, checked strictly. Returns the list of violations (empty when valid).
 */
type Json = unknown
type Schema = Record<string, Json>

const isObject = (v: Json): v is Record<string, Json> => typeof v === "object" && v !== null && !Array.isArray(v)

const typeMatches = (value: Json, type: string): boolean => {
  switch (type) {
    case "object":
      return isObject(value)
    case "array":
      return Array.isArray(value)
    case "string":
      return typeof value === "string"
    case "integer":
      return Number.isInteger(value)
    case "number":
      return typeof value === "number" && Number.isFinite(value)
    case "boolean":
      return typeof value === "boolean"
    case "null":
      return value === null
    default:
      return false
  }
}

const formats: Record<string, RegExp> = {
  "date-time": /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/,
  date: /^\d{4}-\d{2}-\d{2}$/,
  email: /^[^@\s]+@[^@\s]+\.[^@\s]+$/,
  uri: /^[a-z][a-z0-9+.-]*:\/\/\S+$/,
  uuid: /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/
}

const resolve = (root: Schema, ref: string): Schema => {
  let node: Json = root
  for (const part of ref.replace(/^#\/?/, "").split("/").filter(Boolean)) node = isObject(node) ? node[part] : undefined
  if (!isObject(node)) throw new Error(`unresolvable $ref ${ref}`)
  return node
}

export const validateJsonSchema = (value: Json, schema: Schema, root: Schema = schema, path = "$"): Array<string> => {
  if (typeof schema.$ref === "string") return validateJsonSchema(value, resolve(root, schema.$ref), root, path)
  const errors: Array<string> = []
  const fail = (message: string) => errors.push(`${path}: ${message}`)
  if ("const" in schema && JSON.stringify(schema.const) !== JSON.stringify(value)) fail(`expected const ${JSON.stringify(schema.const)}`)
  if (Array.isArray(schema.enum) && !schema.enum.some((e) => JSON.stringify(e) === JSON.stringify(value))) fail(`not in enum`)
  const types = typeof schema.type === "string" ? [schema.type] : Array.isArray(schema.type) ? (schema.type as Array<string>) : []
  if (types.length > 0 && !types.some((t) => typeMatches(value, t))) fail(`expected type ${types.join("|")}, got ${JSON.stringify(value)}`)
  if (Array.isArray(schema.allOf)) for (const s of schema.allOf) errors.push(...validateJsonSchema(value, s as Schema, root, path))
  if (Array.isArray(schema.anyOf) && !schema.anyOf.some((s) => validateJsonSchema(value, s as Schema, root, path).length === 0)) fail("matches no anyOf branch")
  if (Array.isArray(schema.oneOf) && schema.oneOf.filter((s) => validateJsonSchema(value, s as Schema, root, path).length === 0).length !== 1) fail("must match exactly one oneOf branch")
  if (isObject(value)) {
    const properties = isObject(schema.properties) ? schema.properties : {}
    for (const key of Array.isArray(schema.required) ? (schema.required as Array<string>) : []) if (!(key in value)) fail(`missing required ${key}`)
    for (const [key, v] of Object.entries(value)) {
      if (isObject(properties[key])) errors.push(...validateJsonSchema(v, properties[key] as Schema, root, `${path}.${key}`))
      else if (schema.additionalProperties === false) fail(`unexpected property ${key}`)
      else if (isObject(schema.additionalProperties)) errors.push(...validateJsonSchema(v, schema.additionalProperties, root, `${path}.${key}`))
    }
    if (typeof schema.minProperties === "number" && Object.keys(value).length < schema.minProperties) fail("too few properties")
  }
  if (Array.isArray(value)) {
    if (typeof schema.minItems === "number" && value.length < schema.minItems) fail(`fewer than ${schema.minItems} items`)
    if (typeof schema.maxItems === "number" && value.length > schema.maxItems) fail(`more than ${schema.maxItems} items`)
    if (schema.uniqueItems === true && new Set(value.map((v) => JSON.stringify(v))).size !== value.length) fail("items not unique")
    value.forEach((item, i) => {
      const prefix = Array.isArray(schema.prefixItems) ? schema.prefixItems : []
      const itemSchema = i < prefix.length ? prefix[i] : schema.items
      if (isObject(itemSchema)) errors.push(...validateJsonSchema(item, itemSchema, root, `${path}[${i}]`))
    })
  }
  if (typeof value === "string") {
    if (typeof schema.minLength === "number" && value.length < schema.minLength) fail(`shorter than ${schema.minLength}`)
    if (typeof schema.maxLength === "number" && value.length > schema.maxLength) fail(`longer than ${schema.maxLength}`)
    const format = typeof schema.format === "string" ? formats[schema.format] : undefined
    if (format !== undefined && !format.test(value)) fail(`not a ${String(schema.format)}: ${value}`)
  }
  if (typeof value === "number") {
    if (typeof schema.minimum === "number" && value < schema.minimum) fail(`below minimum ${schema.minimum}`)
    if (typeof schema.maximum === "number" && value > schema.maximum) fail(`above maximum ${schema.maximum}`)
    if (typeof schema.exclusiveMinimum === "number" && value <= schema.exclusiveMinimum) fail(`not above ${schema.exclusiveMinimum}`)
    if (typeof schema.exclusiveMaximum === "number" && value >= schema.exclusiveMaximum) fail(`not below ${schema.exclusiveMaximum}`)
    if (typeof schema.multipleOf === "number") {
      const ratio = value / schema.multipleOf
      if (Math.abs(ratio - Math.round(ratio)) > 1e-9) fail(`not a multiple of ${schema.multipleOf}`)
    }
  }
  return errors
}
