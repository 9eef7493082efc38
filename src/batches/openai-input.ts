/**
 * Validation of an OpenAI batch input file (JSONL, one `{custom_id, method, url, body}` per line).
 * Problems of the file as a whole (bad JSON line, wrong `method` or `url`, a `url` other than the
 * batch's endpoint, a duplicate `custom_id`, a non-object `body`) fail the batch: it is created
 * `failed` with `errors` naming each line, as OpenAI does. Problems inside a body (unknown model,
 * bad parameters) are not checked here: they become that line's error when it runs.
 * The file is read line by line over its bytes, yielding to the event loop every `SCAN_BUDGET`
 * (counting each line as at least 64 bytes, so a file of nothing but newlines yields too), and
 * stops counting past `MAX_BATCH_REQUESTS`: a 32 MiB upload of blank or tiny lines once split into
 * millions of strings at once and held every client for 2 s. A line above `SLICED_LINE_BYTES` is
 * parsed by the sliced parser (`util/sliced-json.ts`), with its limits; a shorter one by
 * `JSON.parse`, in well under a millisecond.
 */
import { Effect } from "effect"
import { isPlainObject } from "../util/json.ts"
import { jsonTextInSlices } from "../util/sliced-stringify.ts"
import { slicedJsonParser } from "../util/sliced-json.ts"

export const MAX_BATCH_REQUESTS = 1_000
const MAX_CUSTOM_ID = 512
/** At most this many validation errors are reported. */
const MAX_ERRORS = 100
/** Bytes scanned (or lines, at 64 bytes each) between two yields to the event loop. */
const SCAN_BUDGET = 256 * 1024
/** Lines longer than this are parsed in slices. */
const SLICED_LINE_BYTES = 64 * 1024

interface InputError {
  readonly code: string
  readonly message: string
  readonly param: string | null
  readonly line: number | null
}

export type ParsedInput =
  | { readonly _tag: "Valid"; readonly requests: ReadonlyArray<{ readonly customId: string; readonly params: string }> }
  | { readonly _tag: "Invalid"; readonly errors: ReadonlyArray<InputError> }
  /** Not a batch at all: no line, or more than the limit (a 400 at create; `lines` is then `MAX_BATCH_REQUESTS + 1`). */
  | { readonly _tag: "WrongSize"; readonly lines: number }

/** A line's bytes (`content[start, end)`, without its LF) and its number in the file. */
interface Line {
  readonly start: number
  readonly end: number
  readonly line: number
}

const LF = 10
const CR = 13

/** Where the first byte of `content[start, end)` that is not an ASCII space, tab, CR, VT or FF is; -1 when there is none. */
const firstNonSpace = (content: Uint8Array, start: number, end: number) => {
  for (let i = start; i < end; i++) {
    const byte = content[i]!
    if (byte !== 32 && (byte < 9 || byte > 13)) return i
  }
  return -1
}

/**
 * The file's non-blank lines, at most `MAX_BATCH_REQUESTS + 1` of them (one more says the file is
 * too large). LF never occurs inside a UTF-8 sequence, so the bytes are cut at it directly.
 */
const nonBlankLines = Effect.fnUntraced(function*(content: Uint8Array, decoder: TextDecoder): Effect.fn.Return<Array<Line>> {
  const lines: Array<Line> = []
  let budget = 0
  let number = 0
  for (let start = 0; start < content.length && lines.length <= MAX_BATCH_REQUESTS;) {
    const lf = content.indexOf(LF, start)
    const next = lf === -1 ? content.length : lf + 1
    let end = lf === -1 ? content.length : lf
    if (end > start && content[end - 1] === CR) end--
    number++
    // Blank as `trim` sees it: ASCII spaces scanned a budget at a time (a 32 MiB line of them is
    // one scan), Unicode ones decoded only when a non-ASCII byte comes first.
    let first = -1
    for (let from = start; from < end; from += SCAN_BUDGET) {
      first = firstNonSpace(content, from, Math.min(end, from + SCAN_BUDGET))
      if (first !== -1) break
      if (end - from > SCAN_BUDGET) yield* Effect.yieldNow
    }
    const blank = first === -1 || (content[first]! >= 0x80 && decoder.decode(content.subarray(first, end)).trim() === "")
    if (!blank) lines.push({ start, end, line: number })
    budget += Math.max(64, next - start)
    if (budget > SCAN_BUDGET) {
      budget = 0
      yield* Effect.yieldNow
    }
    start = next
  }
  return lines
})

/** A line's JSON value, or why it has none: not JSON, or past the sliced parser's limits (depth, values). */
const parseLine = (content: Uint8Array, line: Line, decoder: TextDecoder): Effect.Effect<{ value: unknown } | { problem: string }> => {
  const bytes = content.subarray(line.start, line.end)
  if (bytes.length <= SLICED_LINE_BYTES) {
    try {
      return Effect.succeed({ value: JSON.parse(decoder.decode(bytes)) as unknown })
    } catch {
      return Effect.succeed({ problem: "is not valid JSON" })
    }
  }
  const parser = slicedJsonParser()
  return parser.feed(bytes).pipe(
    Effect.andThen(parser.end()),
    Effect.map((value): { value: unknown } | { problem: string } => ({ value })),
    Effect.catch((error) => Effect.succeed({ problem: error.message.startsWith("Malformed JSON") ? "is not valid JSON" : `is refused: ${error.message}` }))
  )
}

export const parseOpenAiInput = Effect.fnUntraced(function*(content: Uint8Array, endpoint: string): Effect.fn.Return<ParsedInput> {
  const decoder = new TextDecoder()
  const lines = yield* nonBlankLines(content, decoder)
  if (lines.length === 0 || lines.length > MAX_BATCH_REQUESTS) return { _tag: "WrongSize", lines: lines.length } as const
  const errors: Array<InputError> = []
  const requests: Array<{ customId: string; params: string }> = []
  const seen = new Set<string>()
  const fail = (code: string, message: string, line: number, param: string | null = null) => {
    if (errors.length < MAX_ERRORS) errors.push({ code, message, param, line })
  }
  let budget = 0
  for (const at of lines) {
    const line = at.line
    budget += at.end - at.start
    if (budget > SCAN_BUDGET) {
      budget = 0
      yield* Effect.yieldNow
    }
    const parsed = yield* parseLine(content, at, decoder)
    if ("problem" in parsed) {
      fail("invalid_json_line", `Line ${line} ${parsed.problem}.`, line)
      continue
    }
    const value = parsed.value
    if (!isPlainObject(value)) {
      fail("invalid_json_line", `Line ${line} is not a JSON object.`, line)
      continue
    }
    const customId = value.custom_id
    if (typeof customId !== "string" || customId === "" || customId.length > MAX_CUSTOM_ID || customId.includes("\u0000")) {
      fail("missing_required_parameter", `Line ${line}: custom_id must be a non-empty string of at most ${MAX_CUSTOM_ID} characters.`, line, "custom_id")
      continue
    }
    if (seen.has(customId)) {
      fail("duplicate_custom_id", `Line ${line}: the custom_id '${customId}' is used by an earlier line; custom_id must be unique.`, line, "custom_id")
      continue
    }
    seen.add(customId)
    if (value.method !== "POST") {
      fail("invalid_method", `Line ${line}: method must be POST.`, line, "method")
      continue
    }
    if (value.url !== endpoint) {
      fail(
        "mismatched_endpoint",
        `Line ${line}: url must be the batch's endpoint ${endpoint}; got ${JSON.stringify(value.url)}. All lines of a batch use one endpoint.`,
        line,
        "url"
      )
      continue
    }
    if (!isPlainObject(value.body)) {
      fail("invalid_request", `Line ${line}: body must be a JSON object.`, line, "body")
      continue
    }
    // A large body is serialized in slices, as an upstream call's is (`JSON.stringify` of a
    // 32 MiB string alone held the event loop for 60 ms).
    requests.push({ customId, params: yield* jsonTextInSlices(value.body) })
  }
  return errors.length > 0 ? { _tag: "Invalid", errors } as const : { _tag: "Valid", requests } as const
})
