import { Schema, SchemaIssue } from "effect"

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

export const firstIssue = (error: Schema.SchemaError): FirstIssue => {
  const [issue] = formatter(error.issue).issues
  if (issue === undefined) return { path: "", message: error.message }
  const path = formatPath((issue.path ?? []).map((p) => (typeof p === "object" && p !== null && "key" in p ? p.key : p) as PropertyKey))
  return { path, message: issue.message }
}
