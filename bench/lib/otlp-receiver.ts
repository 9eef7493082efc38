/**
 * A minimal OTLP/HTTP JSON receiver for benchmarks: accepts `POST /v1/traces`, counts the spans it
 * is sent (parsing each batch, as a collector would) and answers `{}`.
 */
import { createServer } from "node:http"

export const startOtlpReceiver = () =>
  new Promise<{ url: string; spans: () => number; close: () => Promise<void> }>((resolve) => {
    let spans = 0
    const server = createServer((req, res) => {
      let body = ""
      req.setEncoding("utf8")
      req.on("data", (d: string) => (body += d))
      req.on("end", () => {
        if (req.url === "/v1/traces") {
          const data = JSON.parse(body) as { resourceSpans: Array<{ scopeSpans: Array<{ spans: Array<unknown> }> }> }
          for (const resource of data.resourceSpans) for (const scope of resource.scopeSpans) spans += scope.spans.length
        }
        res.writeHead(200, { "content-type": "application/json" })
        res.end("{}")
      })
    })
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as { port: number }
      resolve({
        url: `http://127.0.0.1:${port}`,
        spans: () => spans,
        close: () => new Promise<void>((done) => {
          server.closeAllConnections()
          server.close(() => done())
        })
      })
    })
  })
