/** A parsed JSON value, read-only: what request bodies, states, runs and artifact rows hold. */
export type Json = null | boolean | number | string | ReadonlyArray<Json> | { readonly [key: string]: Json }

/** A JSON object: what a state's merge patch and an artifact's row are. */
export type JsonObject = { readonly [key: string]: Json }

/** JSON type names as PostgreSQL's `jsonb_typeof` spells them. */
export type JsonType = "null" | "boolean" | "number" | "string" | "array" | "object"

export const jsonType = (value: Json): JsonType =>
  value === null
    ? "null"
    : Array.isArray(value)
    ? "array"
    : typeof value === "object"
    ? "object"
    : (typeof value as "boolean" | "number" | "string")

/**
 * A JSON object (not null, not an array): a parsed body's field before it is checked, or a `Json`
 * value. The one test of it; values come from `JSON.parse`, so its fields are `Json`.
 */
export const isPlainObject = (value: unknown): value is JsonObject =>
  typeof value === "object" && value !== null && !Array.isArray(value)
