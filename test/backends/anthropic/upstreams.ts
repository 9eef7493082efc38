/**
 * Upstreams for the Anthropic backend's tests:
 * - `startInProcessSimulateUpstream`: the real `gateway simulate` server (in the test's process),
 *   which answers `/v1/messages` with the Messages dialect's encoder over the simulator (and takes
 *   faults on `/_simulator/faults`);
 * - `startScriptedUpstream`: a bare node:http server whose answers a test writes by hand (429s,
 *   mid-stream errors, broken streams), recording every request and counting connections.
 */
import { createServer, type IncomingMessage, type ServerResponse } from "node:http"
import type { AddressInfo } from "node:net"
export { startInProcessSimulateUpstream, type SimulateUpstream } from "../../support/simulate-process.ts"

export interface RecordedRequest {
  readonly method: string
  readonly url: string
  readonly headers: IncomingMessage["headers"]
  readonly body: any
}

export type Script = (request: RecordedRequest, res: ServerResponse) => void

export interface ScriptedUpstream {
  readonly baseUrl: string
  readonly requests: Array<RecordedRequest>
  /** TCP connections accepted so far (keep-alive reuse keeps this at 1). */
  connections(): number
  /** Resolves when the client side of the current response goes away before it finished. */
  aborted(): Promise<void>
  /** What the next requests get. */
  script: Script
  stop(): Promise<void>
}

/** SSE text of named Messages events. */
export const sse = (...events: ReadonlyArray<Record<string, unknown>>) =>
  events.map((event) => `event: ${String(event.type)}\ndata: ${JSON.stringify(event)}\n\n`).join("")

export const startScriptedUpstream = async (): Promise<ScriptedUpstream> => {
  const requests: Array<RecordedRequest> = []
  let connections = 0
  let onAbort: () => void = () => {}
  const server = createServer((req, res) => {
    let text = ""
    // Decoded as a stream: a character whose UTF-8 bytes a read splits is kept whole.
    req.setEncoding("utf8")
    req.on("data", (d: string) => (text += d))
    req.on("end", () => {
      const recorded = { method: req.method ?? "", url: req.url ?? "", headers: req.headers, body: text === "" ? undefined : JSON.parse(text) }
      requests.push(recorded)
      res.on("close", () => {
        if (!res.writableFinished) onAbort()
      })
      upstream.script(recorded, res)
    })
  })
  server.on("connection", () => connections++)
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const { port } = server.address() as AddressInfo
  const upstream: ScriptedUpstream = {
    baseUrl: `http://127.0.0.1:${port}`,
    requests,
    connections: () => connections,
    aborted: () => new Promise<void>((resolve) => (onAbort = resolve)),
    script: (_, res) => res.writeHead(500).end(),
    stop: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections()
        server.close(() => resolve())
      })
  }
  return upstream
}
