/**
 * Schema issues as people read them, and the one mapping from a bad request field to a 400: every
 * surface (the four dialects, every JSON route) names the field in `param` and starts its message
 * with the field's path, `messages[2].content[0].image_url.url: Expected string, got 5`; a problem
 * with the body as a whole reads `Invalid request body: …` and has no `param`.
 */
import { type Schema, SchemaIssue } from "effect"
import { InvalidRequest } from "../errors.ts"

/** The first problem a Schema decode found, with the JSON path of the field it concerns. */
export interface FirstIssue {
  /** Dotted path such as `models[0].placements[1].capacity`; empty for the root value. */
  readonly path: string
  readonly message: string
}

const formatter = SchemaIssue.makeFormatterStandardSchemaV1()

/** Renders a property path the way people write it: `a.b[0].c`. */
export const formatPath = (path: ReadonlyArray<PropertyKey>): string => {
  let out = ""
  for (const key of path) {
    if (typeof key === "number") out += `[${key}]`
    else if (typeof key === "string" && /^[A-Za-z_$][\w$-]*$/.test(key)) out += out === "" ? key : `.${key}`
    else out += `[${JSON.stringify(String(key))}]`
  }
  return out
}

/** The first problem of an issue tree (a decode reports one: it stops at the first). */
const firstIssueOf = (issue: SchemaIssue.Issue, fallback = "Invalid value"): FirstIssue => {
  const [first] = formatter(issue).issues
  if (first === undefined) return { path: "", message: fallback }
  const path = formatPath((first.path ?? []).map((p) => (typeof p === "object" && p !== null && "key" in p ? p.key : p) as PropertyKey))
  return { path, message: first.message }
}

export const firstIssue = (error: Schema.SchemaError): FirstIssue => firstIssueOf(error.issue, error.message)

/** `a` + `b` as a field path: `messages[2]` + `content[0].type` → `messages[2].content[0].type`. */
const joinPath = (prefix: string, rest: string): string =>
  prefix === "" ? rest : rest === "" ? prefix : rest.startsWith("[") ? `${prefix}${rest}` : `${prefix}.${rest}`

/**
 * The 400 for a bad field: `param` is its path, the message starts with it. Built without a stack
 * trace: it reports the client's mistake, not ours, and capturing one was most of its cost (≈3 of
 * 4 µs), paid on every refused request.
 */
export const invalidField = (param: string, message: string): InvalidRequest => {
  const stackTraceLimit = Error.stackTraceLimit
  Error.stackTraceLimit = 0
  try {
    return param === ""
      ? new InvalidRequest({ message: `Invalid request body: ${message}` })
      : new InvalidRequest({ message: `${param}: ${message}`, param })
  } finally {
    Error.stackTraceLimit = stackTraceLimit
  }
}

/** The 400 for a Schema issue found in the value at `at` (a path in the body; "" for the body itself). */
export const invalidRequestFromIssue = (issue: SchemaIssue.Issue, at = ""): InvalidRequest => {
  const first = firstIssueOf(issue)
  return invalidField(joinPath(at, first.path), first.message)
}
