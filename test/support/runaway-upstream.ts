/**
 * An upstream that ignores the output ceiling it is sent and streams words without end, in the
 * OpenAI Chat Completions dialect (`/v1/chat/completions`) and in Anthropic's (`/v1/messages`),
 * as fast as the gateway reads, until the gateway hangs up — or, given `stopAfterWords`, ends the
 * stream properly after that many words.
 */
import { createServer, type IncomingMessage, type ServerResponse } from "node:http"
import type { AddressInfo } from "node:net"

export interface RunawayUpstream {
  readonly url: string
  /** The output ceiling of the last request, connections closed, and words written in all. */
  readonly seen: { maxTokens: number | undefined; closed: number; words: number }
  /** Words each stream sends before it ends properly; undefined: without end. */
  stopAfterWords: number | undefined
  /** The text of each delta (counted as `WORDS` words); eight English words unless set. */
  delta: string
  close(): Promise<void>
}

/** Words per delta. */
const WORDS = 8
const DELTA = "word ".repeat(WORDS)

const data = (event: string | undefined, body: unknown) => `${event === undefined ? "" : `event: ${event}\n`}data: ${JSON.stringify(body)}\n\n`

const dialects = {
  openai: {
    head: () => data(undefined, { id: "chatcmpl-1", object: "chat.completion.chunk", created: 0, model: "m", choices: [{ index: 0, delta: { role: "assistant", content: "" }, finish_reason: null }] }),
    delta: (text: string) => data(undefined, { id: "chatcmpl-1", object: "chat.completion.chunk", created: 0, model: "m", choices: [{ index: 0, delta: { content: text }, finish_reason: null }] }),
    end: (words: number) =>
      data(undefined, { id: "chatcmpl-1", object: "chat.completion.chunk", created: 0, model: "m", choices: [{ index: 0, delta: {}, finish_reason: "stop" }] }) +
      data(undefined, { id: "chatcmpl-1", object: "chat.completion.chunk", created: 0, model: "m", choices: [], usage: { prompt_tokens: 5, completion_tokens: words, total_tokens: words + 5 } }) +
      "data: [DONE]\n\n"
  },
  anthropic: {
    head: () =>
      data("message_start", { type: "message_start", message: { id: "msg_1", type: "message", role: "assistant", model: "m", content: [], stop_reason: null, stop_sequence: null, usage: { input_tokens: 5, output_tokens: 1 } } }) +
      data("content_block_start", { type: "content_block_start", index: 0, content_block: { type: "text", text: "" } }),
    delta: (text: string) => data("content_block_delta", { type: "content_block_delta", index: 0, delta: { type: "text_delta", text } }),
    end: (words: number) =>
      data("content_block_stop", { type: "content_block_stop", index: 0 }) +
      data("message_delta", { type: "message_delta", delta: { stop_reason: "end_turn", stop_sequence: null }, usage: { output_tokens: words } }) +
      data("message_stop", { type: "message_stop" })
  }
}

export const startRunawayUpstream = async (): Promise<RunawayUpstream> => {
  const upstream: RunawayUpstream = {
    url: "",
    seen: { maxTokens: undefined, closed: 0, words: 0 },
    stopAfterWords: undefined,
    delta: DELTA,
    close: async () => {
      server.closeAllConnections()
      await new Promise((resolve) => server.close(resolve))
    }
  }
  const stream = async (req: IncomingMessage, res: ServerResponse) => {
    let body = ""
    for await (const chunk of req) body += chunk
    upstream.seen.maxTokens = (JSON.parse(body) as { max_tokens?: number; max_completion_tokens?: number }).max_completion_tokens ??
      (JSON.parse(body) as { max_tokens?: number }).max_tokens
    const dialect = req.url!.endsWith("/messages") ? dialects.anthropic : dialects.openai
    res.socket!.once("close", () => upstream.seen.closed++)
    res.writeHead(200, { "content-type": "text/event-stream" })
    res.write(dialect.head())
    const limit = upstream.stopAfterWords ?? Infinity
    let words = 0
    while (!res.destroyed && words < limit) {
      words += WORDS
      upstream.seen.words += WORDS
      if (!res.write(dialect.delta(upstream.delta))) {
        await new Promise<void>((resolve) => {
          const done = () => {
            res.off("drain", done).off("close", done)
            resolve()
          }
          res.on("drain", done).on("close", done)
        })
      }
    }
    if (!res.destroyed) res.end(dialect.end(words))
  }
  const server = createServer((req, res) => void stream(req, res))
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  return Object.assign(upstream, { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` })
}
