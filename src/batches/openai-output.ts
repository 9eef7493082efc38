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

export const openaiOutputFiles = (_batchId: string, rows: ReadonlyArray<ResultRow>) => {
  const output: Array<string> = []
  const error: Array<string> = []
  for (const row of rows) {
    const id = `batch_req_${randomBase62(16)}`
    if (row.state === "canceled" || row.state === "expired") {
      error.push(JSON.stringify({ id, custom_id: row.customId, response: null, error: stopped[row.state] }))
      continue
    }
    if (row.result === null) continue
    const line = `{"id":${JSON.stringify(id)},"custom_id":${JSON.stringify(row.customId)},"response":${row.result},"error":null}`
    ;(row.state === "succeeded" ? output : error).push(line)
  }
  const file = (lines: Array<string>) => lines.length === 0 ? undefined : encoder.encode(lines.join("\n") + "\n")
  return { output: file(output), error: file(error) }
}
