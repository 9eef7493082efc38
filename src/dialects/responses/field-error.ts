/**
 * Hand-written readers for the parts of the body whose shape depends on a `type` field (input
 * items, content parts, tools, formats). A Schema union would answer "expected one of …" about
 * the wrong member; these readers say what is wrong with the member the client meant, and where.
 */
import { InvalidRequest } from "../../errors.ts"

/** Thrown inside the pure readers, turned into one 400 by `decode`. */
export class FieldError {
  readonly path: string
  readonly message: string
  constructor(path: string, message: string) {
    this.path = path
    this.message = message
  }
}

/**
 * Thrown when an input item refers (`item_reference`, or a bare `{id}`) to an item that is not
 * among the caller's stored items; the route answers 404 naming only that id.
 */
export class MissingItem {
  readonly id: string
  constructor(id: string) {
    this.id = id
  }
}

export const toInvalidRequest = (error: FieldError): InvalidRequest =>
  new InvalidRequest({ message: `${error.path}: ${error.message}`, param: error.path })

export type Obj = { readonly [key: string]: unknown }

export const isObject = (value: unknown): value is Obj =>
  typeof value === "object" && value !== null && !Array.isArray(value)

export const object = (value: unknown, path: string): Obj => {
  if (!isObject(value)) throw new FieldError(path, "expected an object")
  return value
}

export const string = (obj: Obj, key: string, path: string): string => {
  const value = obj[key]
  if (typeof value !== "string") throw new FieldError(`${path}.${key}`, value === undefined ? "is required" : "expected a string")
  return value
}

/** An optional string; null counts as absent. */
export const optionalString = (obj: Obj, key: string, path: string): string | undefined => {
  const value = obj[key]
  if (value === undefined || value === null) return undefined
  if (typeof value !== "string") throw new FieldError(`${path}.${key}`, "expected a string")
  return value
}
