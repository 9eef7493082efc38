/**
 * The two JSONL files an OpenAI batch ends with (as OpenAI writes them), in input order:
 * - output: one line per request answered with a 2xx, `{id, custom_id, response, error: null}`;
 * - error: one line per request answered with an error status (`response` holds the error body),
 *   and per request never answered — `response: null` with `error.code` `batch_cancelled` or
 *   `batch_expired`.
 * A file with no line is not written (its id stays null).
 */
import { randomBase62 } from "../util/ids.ts"
import type { ResultRow } from "./batches-repo.ts"

const encoder = new TextEncoder()

const stopped = {
  canceled: { code: "batch_cancelled", message: "This request was cancelled before it was executed." },
  expired: { code: "batch_expired", message: "This request could not be executed before the completion window expired." }
} as const

/**
 * The two files built a page of results at a time (`BatchesRepo.forEachResultPage`): each page's
 * lines become one UTF-8 piece of its file, so the results are never all read, joined or encoded
 * at once (a batch of long answers holds tens of MiB of them).
 */
export const openaiOutputFiles = () => {
  const output: Array<Uint8Array> = []
  const error: Array<Uint8Array> = []
  const piece = (lines: Array<string>) => encoder.encode(lines.join("\n") + "\n")
  return {
    add: (rows: ReadonlyArray<ResultRow>) => {
      const outputLines: Array<string> = []
      const errorLines: Array<string> = []
      for (const row of rows) {
        const id = `batch_req_${randomBase62(16)}`
        if (row.state === "canceled" || row.state === "expired") {
          errorLines.push(JSON.stringify({ id, custom_id: row.customId, response: null, error: stopped[row.state] }))
          continue
        }
        if (row.result === null) continue
        const line = `{"id":${JSON.stringify(id)},"custom_id":${JSON.stringify(row.customId)},"response":${row.result},"error":null}`
        ;(row.state === "succeeded" ? outputLines : errorLines).push(line)
      }
      if (outputLines.length > 0) output.push(piece(outputLines))
      if (errorLines.length > 0) error.push(piece(errorLines))
    },
    /** Each file's pieces, or undefined for a file with no line. */
    files: () => ({ output: output.length === 0 ? undefined : output, error: error.length === 0 ? undefined : error })
  }
}
