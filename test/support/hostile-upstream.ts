/**
 * Answers of a broken or hostile upstream, past the gateway's limits on what it reads: written
 * 1 MiB at a time, as fast as the gateway reads, until the gateway hangs up.
 */
import type { ServerResponse } from "node:http"
import { MAX_WHOLE_ANSWER_BYTES } from "../../src/backends/upstream/upstream-call.ts"
import { MAX_SSE_LINE_CHARS } from "../../src/backends/upstream/sse.ts"

const PIECE = "x".repeat(1024 * 1024)

/** Writes `head`, then `piece` until `total` characters are past, or the gateway has gone. */
const writePast = async (res: ServerResponse, head: string, total: number, piece = PIECE): Promise<void> => {
  res.write(head)
  for (let sent = 0; sent <= total && !res.destroyed; sent += piece.length) {
    if (!res.write(piece)) {
      await new Promise<void>((resolve) => {
        const done = () => {
          res.off("drain", done).off("close", done)
          resolve()
        }
        res.on("drain", done).on("close", done)
      })
    }
  }
  res.end()
}

/** An event stream: `head` (the events before it), then one line that does not end, 1 MiB past the SSE reader's limit. */
export const writeEndlessLine = (res: ServerResponse, head: string): Promise<void> => {
  res.writeHead(200, { "content-type": "text/event-stream" })
  return writePast(res, head, MAX_SSE_LINE_CHARS)
}

/**
 * An event stream: `head` (the events before it), then `data:` lines of 1 MiB each without the
 * blank line that would end their event, until they are 1 MiB past the SSE reader's limit.
 */
export const writeEndlessEvent = (res: ServerResponse, head: string): Promise<void> => {
  res.writeHead(200, { "content-type": "text/event-stream" })
  return writePast(res, head, MAX_SSE_LINE_CHARS, `data: ${PIECE}\n`)
}

/** A JSON answer 1 MiB past the largest whole answer the gateway reads. */
export const writeHugeJson = (res: ServerResponse): Promise<void> => {
  res.writeHead(200, { "content-type": "application/json" })
  return writePast(res, "{\"padding\":\"", MAX_WHOLE_ANSWER_BYTES)
}
