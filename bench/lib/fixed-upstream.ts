/**
 * The overhead arms' upstream: a minimal node:http server with a fixed answer, so the rig (not the
 * upstream) is never what limits a proxy arm. It speaks just enough of OpenAI Chat Completions:
 * `POST …/chat/completions` answers one fixed completion as JSON, or — when the body asks for
 * `"stream": true` — a fixed SSE stream of `deltas` content chunks (optionally paced) and a usage
 * chunk; a model name ending in `-long` gets `LONG_FACTOR` times as many (the per-frame cost of a
 * proxy is the CPU difference between the two answers). `POST …/messages` answers the same in the
 * Anthropic Messages API's shapes (a message, or its event stream: one `content_block_delta` per
 * content chunk), for an `anthropic` placement. Anything else is a 404. Run standalone: `node bench/lib/fixed-upstream.ts [port]`.
 */
import { createServer, type IncomingMessage, type ServerResponse } from "node:http"

export interface FixedUpstreamOptions {
  readonly port?: number
  /** Streams: content chunks per answer (default 16). */
  readonly deltas?: number
  /** Streams: delay before the first chunk and between chunks, ms (default 0: all at once). */
  readonly ttftMs?: number
  readonly gapMs?: number
  /** Streams: after this many content chunks, send nothing more until the caller hangs up (an open stream that has sent that much). */
  readonly pauseAfter?: number
}

const WORDS = "The harbor is quiet at dawn and the boats rest on still water while gulls wait".split(" ")

const completion = (model: string) =>
  JSON.stringify({
    id: "chatcmpl-fixed",
    object: "chat.completion",
    created: 1767225600,
    model,
    choices: [{
      index: 0,
      message: { role: "assistant", content: WORDS.join(" ") + ".", refusal: null },
      logprobs: null,
      finish_reason: "stop"
    }],
    usage: { prompt_tokens: 24, completion_tokens: 16, total_tokens: 40 }
  })

/** A content chunk; with `include_usage` asked, OpenAI puts `usage: null` on every chunk before the usage chunk. */
const chunk = (model: string, delta: Record<string, unknown>, finish: string | null, includeUsage: boolean) =>
  `data: ${JSON.stringify({
    id: "chatcmpl-fixed",
    object: "chat.completion.chunk",
    created: 1767225600,
    model,
    choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }],
    ...(includeUsage ? { usage: null } : {})
  })}\n\n`

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/** The model named in a request body, without parsing all of it (the rig must stay cheap). */
const modelOf = (body: string) => /"model"\s*:\s*"([^"]*)"/.exec(body)?.[1] ?? "fixed"

/** How many times more content chunks a `…-long` model's stream has. */
export const LONG_FACTOR = 4

const stream = async (res: ServerResponse, model: string, includeUsage: boolean, options: FixedUpstreamOptions) => {
  const deltas = (options.deltas ?? 16) * (model.endsWith("-long") ? LONG_FACTOR : 1)
  res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" })
  if ((options.ttftMs ?? 0) > 0) await sleep(options.ttftMs!)
  res.write(chunk(model, { role: "assistant", content: "" }, null, includeUsage))
  for (let i = 0; i < deltas; i++) {
    if (i > 0 && (options.gapMs ?? 0) > 0) await sleep(options.gapMs!)
    if (res.destroyed) return // the caller hung up: a long paced stream stops here
    if (i === options.pauseAfter) return // left open: the caller's hang-up closes it
    res.write(chunk(model, { content: `${WORDS[i % WORDS.length]} ` }, null, includeUsage))
  }
  res.write(chunk(model, {}, "stop", includeUsage))
  res.write(`data: ${JSON.stringify({ id: "chatcmpl-fixed", object: "chat.completion.chunk", created: 1767225600, model, choices: [], usage: { prompt_tokens: 24, completion_tokens: deltas, total_tokens: 24 + deltas } })}\n\n`)
  res.end("data: [DONE]\n\n")
}

/** A Messages API event, as Anthropic frames it (`event:` then `data:`). */
const messagesEvent = (type: string, data: Record<string, unknown>) => `event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`

const messagesStream = async (res: ServerResponse, model: string, options: FixedUpstreamOptions) => {
  const deltas = (options.deltas ?? 16) * (model.endsWith("-long") ? LONG_FACTOR : 1)
  res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" })
  if ((options.ttftMs ?? 0) > 0) await sleep(options.ttftMs!)
  res.write(messagesEvent("message_start", { message: { id: "msg_fixed", type: "message", role: "assistant", model, content: [], stop_reason: null, stop_sequence: null, usage: { input_tokens: 24, output_tokens: 1 } } }))
  res.write(messagesEvent("content_block_start", { index: 0, content_block: { type: "text", text: "" } }))
  for (let i = 0; i < deltas; i++) {
    if (i > 0 && (options.gapMs ?? 0) > 0) await sleep(options.gapMs!)
    if (res.destroyed) return
    if (i === options.pauseAfter) return
    res.write(messagesEvent("content_block_delta", { index: 0, delta: { type: "text_delta", text: `${WORDS[i % WORDS.length]} ` } }))
  }
  res.write(messagesEvent("content_block_stop", { index: 0 }))
  res.write(messagesEvent("message_delta", { delta: { stop_reason: "end_turn", stop_sequence: null }, usage: { output_tokens: deltas } }))
  res.end(messagesEvent("message_stop", {}))
}

const message = (model: string) =>
  JSON.stringify({
    id: "msg_fixed",
    type: "message",
    role: "assistant",
    model,
    content: [{ type: "text", text: WORDS.join(" ") + "." }],
    stop_reason: "end_turn",
    stop_sequence: null,
    usage: { input_tokens: 24, output_tokens: 16 }
  })

const handle = (options: FixedUpstreamOptions) => (req: IncomingMessage, res: ServerResponse) => {
  let body = ""
  req.setEncoding("utf8")
  req.on("data", (d: string) => (body += d))
  req.on("end", () => {
    if (req.method === "POST" && (req.url ?? "").endsWith("/messages")) {
      const model = modelOf(body)
      if (/"stream"\s*:\s*true/.test(body)) return void messagesStream(res, model, options)
      const answer = message(model)
      res.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(answer) })
      return void res.end(answer)
    }
    if (req.method !== "POST" || !(req.url ?? "").endsWith("/chat/completions")) {
      res.writeHead(404, { "content-type": "application/json" })
      res.end(JSON.stringify({ error: { message: "not found", type: "not_found" } }))
      return
    }
    const model = modelOf(body)
    if (/"stream"\s*:\s*true/.test(body)) {
      void stream(res, model, /"include_usage"\s*:\s*true/.test(body), options)
      return
    }
    const answer = completion(model)
    res.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(answer) })
    res.end(answer)
  })
}

/** Starts the server; resolves with its origin and a stop function. */
export const startFixedUpstream = (options: FixedUpstreamOptions = {}) =>
  new Promise<{ url: string; close: () => Promise<void> }>((resolve) => {
    const server = createServer({ keepAliveTimeout: 65_000 }, handle(options))
    server.listen(options.port ?? 0, "127.0.0.1", () => {
      const { port } = server.address() as { port: number }
      resolve({
        url: `http://127.0.0.1:${port}`,
        close: () => new Promise<void>((done) => {
          server.closeAllConnections()
          server.close(() => done())
        })
      })
    })
  })

if (import.meta.main) {
  const port = Number(process.argv[2] ?? 0)
  const ttftMs = Number(process.env.FIXED_TTFT_MS ?? 0)
  const gapMs = Number(process.env.FIXED_GAP_MS ?? 0)
  const { url } = await startFixedUpstream({ port, ttftMs, gapMs })
  console.log(`fixed upstream listening on ${url}`)
}
