/**
 * What the artifacts surface talks about: references, descriptors, column types, query results,
 * and the limits that bound every request. Pure types and constants; no I/O.
 */

/** The spec's five provenance methods. */
export const ProvenanceMethods = ["exact", "model-generated", "heuristic", "truncation", "unknown"] as const
type ProvenanceMethod = typeof ProvenanceMethods[number]

export interface Provenance {
  readonly method: ProvenanceMethod
  readonly lossless: boolean
}

/** How the content was read at upload. */
export type Format = "csv" | "tsv" | "json" | "jsonl" | "text"
export const Formats: ReadonlyArray<Format> = ["csv", "tsv", "json", "jsonl", "text"]

/**
 * A column's type, over every row's value of it (JSON null and missing values aside):
 * one JSON type, `mixed` when several occur, `null` when no row has a non-null value.
 */
export type ColumnType = "number" | "string" | "boolean" | "object" | "array" | "mixed" | "null"

export interface Column {
  readonly name: string
  readonly type: ColumnType
}

/** Rows: one JSON object per record, numbered from 0 in upload order. */
interface TableShape {
  readonly kind: "table"
  readonly rowCount: number
  /** The first `MAX_LISTED_COLUMNS` columns, in first-seen order. */
  readonly columns: ReadonlyArray<Column>
  /** Every distinct top-level key; larger than `columns.length` only past `MAX_LISTED_COLUMNS`. */
  readonly columnCount: number
  /** For a JSON object holding the rows in one of its keys: that key. */
  readonly rowsPath?: string
}

interface TextShape {
  readonly kind: "text"
  /** UTF-8 bytes (what `range.byteStart`/`byteEnd` count). */
  readonly length: number
  readonly characters: number
  readonly lines: number
}

export type Shape = TableShape | TextShape

export interface Reference {
  readonly artifactId: string
  readonly version: number
}

interface VersionSummary {
  readonly version: number
  readonly sizeBytes: number
  readonly contentHash: string
  readonly createdAt: string
}

export interface Descriptor {
  readonly artifactId: string
  readonly version: number
  readonly headVersion: number
  /** Newest first, at most `MAX_LISTED_VERSIONS`; `versionCount` says how many there are. */
  readonly versions: ReadonlyArray<VersionSummary>
  readonly versionCount: number
  readonly sizeBytes: number
  /** `sha256:<hex>` of the content's UTF-8 bytes; identical content has the same hash. */
  readonly contentHash: string
  readonly mimeType: string
  readonly format: Format
  readonly shape: Shape
  readonly summary: string | null
  readonly source: string
  readonly provenance: Provenance
  /** The `rowCount` the uploader declared, if any. */
  readonly declaredRowCount: number | null
  readonly createdAt: string
}

/** The canonical media type of each format, reported when the upload gave none. */
export const formatMimeTypes: Record<Format, string> = {
  csv: "text/csv",
  tsv: "text/tab-separated-values",
  json: "application/json",
  jsonl: "application/jsonl",
  text: "text/plain"
}

/** Limits (README, "Artifacts"). */
export const Limits = {
  /** Rows per query page when `limit` is not given. */
  defaultLimit: 100,
  maxLimit: 1_000,
  /** Bytes of text per query answer; a larger range is cut there and `truncated`. */
  maxTextSlice: 1024 * 1024,
  maxFilters: 64,
  maxSortKeys: 16,
  maxSelect: 256,
  maxInValues: 1_000,
  maxFieldLength: 512,
  maxSearchLength: 1_000,
  /** Serialized size of one filter value. */
  maxValueBytes: 64 * 1024,
  /** Rows per artifact; more is a 413. */
  maxRows: 1_000_000,
  /** A row larger than this (serialized) is not stored as a row. */
  maxRowBytes: 1024 * 1024,
  /** Nor one nesting arrays/objects deeper than this (jsonb, and JSON.stringify, have limits). */
  maxRowDepth: 64,
  /** Nesting of a filter value. */
  maxValueDepth: 32,
  /** Columns listed on the descriptor and used to order each returned row's keys. */
  maxListedColumns: 1_000,
  maxOrderedColumns: 256,
  maxListedVersions: 1_000,
  /** Raw content is kept in chunks of this many bytes. */
  chunkBytes: 256 * 1024
} as const

export const DEFAULT_SOURCE = "api:upload"

/** Whether a string can be an artifact id at all (`art_` + base62); anything else is unknown, 404. */
export const isArtifactId = (id: string) => /^art_[0-9A-Za-z]{1,64}$/.test(id)
