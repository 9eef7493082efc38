/**
 * The floor of a gateway's own work, in plain Node: what `bench/bare-proxy.ts` does (node:http in,
 * undici out) plus the least a translating, metering gateway must do per request, written as
 * straight-line code with no framework — `bench/hot-path.ts --floor` runs it in the gateway's place.
 * Per request: the bearer key hashed (SHA-256) and looked up, the JSON body parsed and its fields
 * checked, a reservation bound counted (UTF-8 bytes) and held in a per-key counter, the upstream
 * body re-encoded, the answer parsed and re-encoded in the OpenAI shape with a fresh id and the
 * model's name as asked, the hold settled at the reported usage,
 * rate-limit headers, and one JSON log line (buffered, written every 100 ms). A stream's frames are
 * each parsed and re-encoded (id and model rewritten), one write per upstream read.
 *
 * Not a gateway: no queue, no failover, no typed errors, no ledger, no metrics. It answers one
 * question — how much of what the gateway spends beyond the bare proxy is work any gateway must do
 * and how much is the gateway's own structure — so its figure is a yardstick, never a target.
 *
 *   node bench/floor-proxy.ts <port> <upstream origin>
 */
import { hash, randomBytes } from "node:crypto"
import { createServer, type ServerResponse } from "node:http"
import { Pool } from "undici"

const [port, origin] = process.argv.slice(2)
if (port === undefined || origin === undefined) throw new Error("usage: floor-proxy.ts <port> <upstream origin>")
const pool = new Pool(origin, { connections: 64, pipelining: 1 })

/** The keys by the SHA-256 of their secret, as the gateway keeps them. The bench's key is `sk-bench`. */
const keys = new Map([[hash("sha256", "sk-bench", "hex"), { id: "key_bench", limitMicros: 1e15 }]])
const spent = new Map<string, { heldMicros: number; spentMicros: number }>()

let logBuffer = ""
let flushScheduled = false
const log = (line: Record<string, unknown>) => {
  logBuffer += `${JSON.stringify(line)}\n`
  if (flushScheduled) return
  flushScheduled = true
  setTimeout(() => {
    flushScheduled = false
    process.stdout.write(logBuffer)
    logBuffer = ""
  }, 100).unref()
}

const sendJson = (res: ServerResponse, status: number, body: string, headers: Record<string, string | number> = {}) => {
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(body), ...headers })
  res.end(body)
}
const fail = (res: ServerResponse, status: number, message: string, param: string | null = null) =>
  sendJson(res, status, JSON.stringify({ error: { message, type: status === 401 ? "authentication_error" : "invalid_request_error", param, code: null } }))

interface ChatBody {
  readonly model: string
  readonly messages: ReadonlyArray<{ readonly role: string; readonly content: unknown }>
  readonly max_tokens?: number
  readonly stream?: boolean
}

const parseBody = (text: string): ChatBody | string => {
  let body: unknown
  try {
    body = JSON.parse(text)
  } catch {
    return "body"
  }
  if (typeof body !== "object" || body === null) return "body"
  const { model, messages, max_tokens: maxTokens } = body as Record<string, unknown>
  if (typeof model !== "string") return "model"
  if (!Array.isArray(messages) || messages.length === 0) return "messages"
  for (const message of messages) {
    if (typeof message !== "object" || message === null || typeof (message as { role?: unknown }).role !== "string") return "messages"
  }
  if (maxTokens !== undefined && (typeof maxTokens !== "number" || !Number.isInteger(maxTokens) || maxTokens < 1)) return "max_tokens"
  return body as ChatBody
}

/** The hold: input bytes (never fewer than tokens) plus the output limit, at one µ$ a token. */
const holdOf = (body: ChatBody) => {
  let bytes = 0
  for (const message of body.messages) if (typeof message.content === "string") bytes += Buffer.byteLength(message.content)
  return bytes + (body.max_tokens ?? 4096)
}

/**
 * `BENCH_FLOOR_SPIN_US`: busy work before each upstream call (0: none), standing in for a longer
 * path to the upstream — to see what else that costs besides itself (`hot-path --floor --timeline
 * --env BENCH_FLOOR_SPIN_US=400`: does the upstream then answer later?).
 */
const SPIN_MS = Number(process.env.BENCH_FLOOR_SPIN_US ?? 0) / 1000
const spin = () => {
  if (SPIN_MS <= 0) return
  const until = performance.now() + SPIN_MS
  while (performance.now() < until) {
    // busy
  }
}

const server = createServer({ keepAliveTimeout: 65_000 }, (req, res) => {
  const startedAt = performance.now()
  const chunks: Array<Buffer> = []
  req.on("data", (chunk: Buffer) => chunks.push(chunk))
  req.on("end", () => {
    const secret = (req.headers.authorization ?? "").replace(/^Bearer /, "")
    const key = keys.get(hash("sha256", secret, "hex"))
    if (key === undefined) return fail(res, 401, "Invalid API key")
    const body = parseBody(Buffer.concat(chunks).toString("utf8"))
    if (typeof body === "string") return fail(res, 400, `Invalid ${body}`, body)
    const account = spent.get(key.id) ?? { heldMicros: 0, spentMicros: 0 }
    spent.set(key.id, account)
    const hold = holdOf(body)
    if (account.spentMicros + account.heldMicros + hold > key.limitMicros) return fail(res, 429, "Allowance spent")
    account.heldMicros += hold
    const settle = (usedMicros: number) => {
      account.heldMicros -= hold
      account.spentMicros += usedMicros
    }
    const id = `chatcmpl-${randomBytes(18).toString("base64url")}`
    const created = Math.floor(Date.now() / 1000)
    const limits = { "x-request-id": `req_${randomBytes(12).toString("base64url")}`, "x-ratelimit-remaining-tokens": String(key.limitMicros - account.spentMicros - account.heldMicros) }
    const upstreamBody = JSON.stringify({
      // The name asked, passed on: the fixed upstream answers any (a `…-long` one with more deltas,
      // which the overhead suite's per-frame figure needs), and writing a catalog's upstream name
      // instead would cost the same.
      model: body.model,
      messages: body.messages.map((message) => ({ role: message.role, content: message.content })),
      ...(body.max_tokens === undefined ? {} : { max_tokens: body.max_tokens }),
      ...(body.stream === true ? { stream: true, stream_options: { include_usage: true } } : {})
    })
    const done = (status: number, tokens: number) =>
      log({ time: new Date().toISOString(), level: "info", msg: "request", key_id: key.id, model: body.model, status, tokens, ms: Math.round(performance.now() - startedAt) })
    spin()
    pool.request({ method: "POST", path: "/v1/chat/completions", headers: { "content-type": "application/json" }, body: upstreamBody }).then(
      async (upstream) => {
        if (body.stream !== true) {
          const answer = JSON.parse(await upstream.body.text()) as {
            choices: Array<{ message: { content: string }; finish_reason: string }>
            usage: { prompt_tokens: number; completion_tokens: number; total_tokens: number }
          }
          const choice = answer.choices[0]
          settle(answer.usage.total_tokens)
          sendJson(res, 200, JSON.stringify({
            id,
            object: "chat.completion",
            created,
            model: body.model,
            choices: [{ index: 0, message: { role: "assistant", content: choice.message.content, refusal: null }, logprobs: null, finish_reason: choice.finish_reason }],
            usage: { prompt_tokens: answer.usage.prompt_tokens, completion_tokens: answer.usage.completion_tokens, total_tokens: answer.usage.total_tokens }
          }), limits)
          return done(200, answer.usage.total_tokens)
        }
        res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache", ...limits })
        const decoder = new TextDecoder()
        let pending = ""
        let tokens = 0
        upstream.body.on("data", (bytes: Buffer) => {
          pending += decoder.decode(bytes, { stream: true })
          let out = ""
          let end = pending.indexOf("\n\n")
          while (end >= 0) {
            const data = pending.slice(pending.startsWith("data: ") ? 6 : 0, end)
            pending = pending.slice(end + 2)
            end = pending.indexOf("\n\n")
            if (data === "[DONE]") {
              out += "data: [DONE]\n\n"
              continue
            }
            const chunk = JSON.parse(data) as { id: string; model: string; created: number; usage?: { total_tokens: number } | null }
            chunk.id = id
            chunk.model = body.model
            chunk.created = created
            // OpenAI's chunks (and the fixed upstream's) carry `usage: null` until the last one.
            if (chunk.usage != null) tokens = chunk.usage.total_tokens
            out += `data: ${JSON.stringify(chunk)}\n\n`
          }
          if (out !== "") res.write(out)
        })
        upstream.body.on("end", () => {
          settle(tokens)
          res.end()
          done(200, tokens)
        })
      },
      (error: unknown) => {
        settle(0)
        fail(res, 502, String(error))
      }
    )
  })
})
server.listen(Number(port), "127.0.0.1", () => console.log(`floor proxy listening on ${port}`))
