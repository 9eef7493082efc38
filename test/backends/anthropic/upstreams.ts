/**
 * Upstreams for the Anthropic backend's tests:
 * - `startSimulateUpstream`: the real `gateway simulate` process, which answers `/v1/messages` with
 *   the Messages dialect's encoder over the simulator (and takes faults on `/_simulator/faults`);
 * - `startScriptedUpstream`: a bare node:http server whose answers a test writes by hand (429s,
 *   mid-stream errors, broken streams), recording every request and counting connections.
 */
import { type ChildProcess, spawn } from "node:child_process"
import { createServer, type IncomingMessage, type ServerResponse } from "node:http"
import type { AddressInfo } from "node:net"
import { join } from "node:path"

const MAIN = join(import.meta.dirname, "..", "..", "..", "src", "main.ts")

export interface SimulateUpstream {
  readonly baseUrl: string
  setFaults(faults: { mode: string; status?: number }): Promise<void>
  stop(): Promise<void>
}

export const startSimulateUpstream = async (apiKey: string): Promise<SimulateUpstream> => {
  const child: ChildProcess = spawn(process.execPath, [MAIN, "simulate", "--port", "0", "--api-key", apiKey], { stdio: ["ignore", "pipe", "pipe"] })
  let output = ""
  child.stderr!.on("data", (d) => (output += d))
  const baseUrl = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`simulator did not start:\n${output}`)), 30_000)
    child.stdout!.on("data", (d) => {
      output += d
      const m = /simulator listening on (http:\/\/\S+)/.exec(output)
      if (m) {
        clearTimeout(timer)
        resolve(m[1])
      }
    })
    child.once("exit", (code) => reject(new Error(`simulator exited with ${code}:\n${output}`)))
  })
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()))
  return {
    baseUrl,
    setFaults: async (faults) => {
      const res = await fetch(`${baseUrl}/_simulator/faults`, { method: "POST", body: JSON.stringify(faults) })
      if (res.status !== 200) throw new Error(`setting faults failed: ${res.status} ${await res.text()}`)
    },
    stop: async () => {
      if (child.exitCode === null) child.kill("SIGTERM")
      await exited
    }
  }
}

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
    req.on("data", (d) => (text += d))
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
