/**
 * Validation of an OpenAI batch input file (JSONL, one `{custom_id, method, url, body}` per line).
 * Problems of the file as a whole (bad JSON line, wrong `method` or `url`, a `url` other than the
 * batch's endpoint, a duplicate `custom_id`, a non-object `body`) fail the batch: it is created
 * `failed` with `errors` naming each line, as OpenAI does. Problems inside a body (unknown model,
 * bad parameters) are not checked here: they become that line's error when it runs.
 * The file is parsed line by line, yielding between lines, so a large file never holds the event
 * loop.
 */
import { Effect } from "effect"
import { isPlainObject } from "../util/json.ts"

export const MAX_BATCH_REQUESTS = 1_000
const MAX_CUSTOM_ID = 512
/** At most this many validation errors are reported. */
const MAX_ERRORS = 100

interface InputError {
  readonly code: string
  readonly message: string
  readonly param: string | null
  readonly line: number | null
}

export type ParsedInput =
  | { readonly _tag: "Valid"; readonly requests: ReadonlyArray<{ readonly customId: string; readonly params: string }> }
  | { readonly _tag: "Invalid"; readonly errors: ReadonlyArray<InputError> }
  /** Not a batch at all: no line, or more than the limit (a 400 at create). */
  | { readonly _tag: "WrongSize"; readonly lines: number }


export const parseOpenAiInput = (content: Uint8Array, endpoint: string): Effect.Effect<ParsedInput> =>
  Effect.gen(function*() {
    const text = new TextDecoder().decode(content)
    const lines = text.split("\n").map((l, i) => ({ text: l.replace(/\r$/, ""), line: i + 1 })).filter((l) => l.text.trim() !== "")
    if (lines.length === 0 || lines.length > MAX_BATCH_REQUESTS) return { _tag: "WrongSize", lines: lines.length } as const
    const errors: Array<InputError> = []
    const requests: Array<{ customId: string; params: string }> = []
    const seen = new Set<string>()
    const fail = (code: string, message: string, line: number, param: string | null = null) => {
      if (errors.length < MAX_ERRORS) errors.push({ code, message, param, line })
    }
    let sinceYield = 0
    for (const { text: lineText, line } of lines) {
      sinceYield += lineText.length
      if (sinceYield > 256 * 1024) {
        sinceYield = 0
        yield* Effect.yieldNow
      }
      let value: unknown
      try {
        value = JSON.parse(lineText)
      } catch {
        fail("invalid_json_line", `Line ${line} is not valid JSON.`, line)
        continue
      }
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
      requests.push({ customId, params: JSON.stringify(value.body) })
    }
    return errors.length > 0 ? { _tag: "Invalid", errors } as const : { _tag: "Valid", requests } as const
  })
