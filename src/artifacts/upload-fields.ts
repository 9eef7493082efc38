/**
 * The upload body's fields besides the content, decoded with Schema (400 naming the field), and
 * what they tell the parser: the format a media type declares and the `schema` hint.
 */
import { Schema } from "effect"
import { type Format, Formats, ProvenanceMethods } from "./model.ts"
import type { ParseHints } from "./parse-content.ts"
import { isWellFormed } from "./values.ts"

/** Text PostgreSQL can store: no U+0000. (Unpaired surrogates never get here: JSON.parse of UTF-8 yields none unless escaped, and those are refused too.) */
const StorableText = (maxLength: number) =>
  Schema.String.check(
    Schema.isMaxLength(maxLength),
    Schema.makeFilter((s: string) => (s.includes("\u0000") ? "must not contain U+0000" : isWellFormed(s) ? undefined : "must not contain an unpaired surrogate"))
  )

/** Optional, and `null` means "not given" (clients often send null for unset fields). */
const optional = <S extends Schema.Top>(schema: S) => Schema.optional(Schema.NullOr(schema))

const ColumnHint = Schema.Struct({
  name: StorableText(512).check(Schema.isMinLength(1)),
  type: optional(Schema.Literals(["number", "string", "boolean"]))
})

/** `schema`: a JSON object (as a string) with any of these fields. */
const SchemaHint = Schema.Struct({
  format: optional(Schema.Literals(Formats)),
  header: optional(Schema.Boolean),
  columns: optional(Schema.Array(ColumnHint).check(Schema.isMaxLength(10_000))),
  rowsPath: optional(StorableText(512))
})

export const UploadFields = Schema.Struct({
  mimeType: optional(StorableText(255)),
  schema: optional(Schema.fromJsonString(SchemaHint)),
  summary: optional(StorableText(4_000)),
  rowCount: optional(Schema.Int.check(Schema.isGreaterThanOrEqualTo(0), Schema.isLessThanOrEqualTo(Number.MAX_SAFE_INTEGER))),
  source: optional(StorableText(1_000)),
  provenance: optional(Schema.Struct({
    method: optional(Schema.Literals(ProvenanceMethods)),
    lossless: optional(Schema.Boolean)
  })),
  artifactId: optional(Schema.String.check(Schema.isMinLength(1), Schema.isMaxLength(200)))
})
export type UploadFields = typeof UploadFields.Type

/** The format a media type declares; undefined when it declares none (detect from the content). */
const formatOfMimeType = (mimeType: string | null | undefined): Format | undefined => {
  if (mimeType === undefined || mimeType === null) return undefined
  const type = mimeType.split(";")[0].trim().toLowerCase()
  switch (type) {
    case "text/csv":
    case "application/csv":
      return "csv"
    case "text/tab-separated-values":
    case "text/tsv":
      return "tsv"
    case "application/jsonl":
    case "application/x-jsonlines":
    case "application/jsonlines":
    case "application/x-ndjson":
    case "application/ndjson":
      return "jsonl"
    case "application/json":
    case "text/json":
      return "json"
  }
  if (type.endsWith("+json")) return "json"
  if (type.startsWith("text/")) return "text"
  return undefined
}

/** The parser's hints: `schema.format` wins over the media type. */
export const parseHints = (fields: UploadFields): ParseHints => {
  const hint = fields.schema ?? undefined
  return {
    format: hint?.format ?? formatOfMimeType(fields.mimeType),
    header: hint?.header ?? undefined,
    columns: hint?.columns?.map((c) => ({ name: c.name, type: c.type ?? undefined })),
    rowsPath: hint?.rowsPath ?? undefined
  }
}
