/**
 * A hostile upstream's answer: `head` (the events before it), then one line that does not end —
 * 1 MiB past the SSE reader's limit — written 1 MiB at a time, as fast as the gateway reads,
 * until the gateway hangs up.
 */
import type { ServerResponse } from "node:http"
import { MAX_SSE_LINE_CHARS } from "../../src/backends/upstream/sse.ts"

export const writeEndlessLine = async (res: ServerResponse, head: string): Promise<void> => {
  res.writeHead(200, { "content-type": "text/event-stream" })
  res.write(head)
  const piece = "x".repeat(1024 * 1024)
  for (let sent = 0; sent <= MAX_SSE_LINE_CHARS && !res.destroyed; sent += piece.length) {
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
