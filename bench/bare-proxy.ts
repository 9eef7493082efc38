/**
 * The floor of the request path: a bare proxy in Node — `node:http` in, undici out, the body
 * passed through untouched, no auth, no parsing, no metering — that `bench/hot-path.ts --bare`
 * runs in the gateway's place. Whatever the gateway spends beyond this, per request at the same
 * rate on the same core, is the gateway's own work; this much every Node proxy pays (the HTTP
 * parsers, two socket writes and reads, the event loop's wake-ups), Portkey included.
 *
 *   node bench/bare-proxy.ts <port> <upstream origin>
 */
import { createServer } from "node:http"
import { Pool } from "undici"

const [port, origin] = process.argv.slice(2)
if (port === undefined || origin === undefined) throw new Error("usage: bare-proxy.ts <port> <upstream origin>")
/** Upstream connections: 64, or `BARE_PROXY_CONNECTIONS` (the stream-memory bench holds one per open stream). */
const pool = new Pool(origin, { connections: Number(process.env.BARE_PROXY_CONNECTIONS ?? 64), pipelining: 1 })

const server = createServer({ keepAliveTimeout: 65_000 }, (req, res) => {
  const chunks: Array<Buffer> = []
  req.on("data", (chunk: Buffer) => chunks.push(chunk))
  req.on("end", () => {
    pool.request({ method: "POST", path: "/v1/chat/completions", headers: { "content-type": "application/json" }, body: Buffer.concat(chunks) }).then(
      (upstream) => {
        res.writeHead(upstream.statusCode, { "content-type": String(upstream.headers["content-type"] ?? "application/json") })
        upstream.body.on("data", (chunk: Buffer) => res.write(chunk))
        upstream.body.on("end", () => res.end())
      },
      (error: unknown) => {
        res.writeHead(502, { "content-type": "application/json" })
        res.end(JSON.stringify({ error: { message: String(error), type: "api_error" } }))
      }
    )
  })
})
server.listen(Number(port), "127.0.0.1", () => console.log(`bare proxy listening on ${port}`))
