/**
 * An OpenAI-like upstream for adapter tests, on node:http at 127.0.0.1:0. By default it answers as
 * OpenAI would, using the gateway's own Chat Completions dialect over the simulator backend; a test
 * can replace the handler to script statuses, headers and raw SSE. It records what it received.
 */
import { Effect, Stream } from "effect"
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http"
import type { AddressInfo, Socket } from "node:net"
import { makeSimulatorBackend, simulatorPlacement } from "../../../src/backends/simulator/simulator.ts"
import { chatDialect } from "../../../src/dialects/chat/index.ts"
import { collect } from "../../../src/model/events.ts"

export interface Received {
  readonly path: string
  readonly headers: IncomingMessage["headers"]
  readonly body: any
  /** Which connection carried the request (1, 2, … in order of first use). */
  readonly connection: number
}

export type Handler = (req: IncomingMessage, res: ServerResponse, body: any) => void | Promise<void>

export interface FakeUpstream {
  readonly url: string
  readonly received: Array<Received>
  handler: Handler
  close(): Promise<void>
}

const simulator = makeSimulatorBackend()

/** What OpenAI would answer: the dialect decodes, the simulator replies, the dialect encodes. */
export const openAiLike: Handler = async (_req, res, body) => {
  const decoded = await Effect.runPromise(chatDialect.decode(body))
  const placement = simulatorPlacement({ modelId: decoded.request.model })
  const events = await Effect.runPromise(Stream.runCollect(simulator.stream(decoded.request, placement)))
  const context = { id: "chatcmpl-upstream", model: decoded.request.model, createdAt: 1, request: decoded.request, echo: decoded.echo }
  if (!decoded.request.stream) {
    res.writeHead(200, { "content-type": "application/json" })
    res.end(JSON.stringify(chatDialect.encodeResponse(collect(events), context)))
    return
  }
  res.writeHead(200, { "content-type": "text/event-stream" })
  const encoder = chatDialect.streamEncoder(context)
  for (const event of events) res.write(encoder.event(event))
  res.end()
}

export const startFakeUpstream = async (): Promise<FakeUpstream> => {
  const received: Array<Received> = []
  const connections = new WeakMap<Socket, number>()
  let opened = 0
  const upstream: FakeUpstream = {
    url: "",
    received,
    handler: openAiLike,
    close: () => new Promise<void>((resolve) => {
      server.closeAllConnections()
      server.close(() => resolve())
    })
  }
  const server: Server = createServer(async (req, res) => {
    const chunks: Array<Buffer> = []
    for await (const chunk of req) chunks.push(chunk as Buffer)
    const text = Buffer.concat(chunks).toString("utf8")
    const body = text === "" ? undefined : JSON.parse(text)
    if (!connections.has(req.socket)) connections.set(req.socket, ++opened)
    received.push({ path: req.url ?? "", headers: req.headers, body, connection: connections.get(req.socket)! })
    try {
      await upstream.handler(req, res, body)
    } catch (error) {
      res.writeHead(500, { "content-type": "application/json" })
      res.end(JSON.stringify({ error: { message: String(error), type: "server_error" } }))
    }
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const { port } = server.address() as AddressInfo
  return Object.assign(upstream, { url: `http://127.0.0.1:${port}` })
}

/** Writes SSE `data:` frames for the given payloads (objects are JSON-encoded). */
export const sse = (...payloads: ReadonlyArray<unknown>) =>
  payloads.map((payload) => `data: ${typeof payload === "string" ? payload : JSON.stringify(payload)}\n\n`).join("")

/** A chunk as an upstream sends it, with the upstream's own model name. */
export const upstreamChunk = (delta: object, finish: string | null = null) => ({
  id: "chatcmpl-up",
  object: "chat.completion.chunk",
  created: 1,
  model: "secret-upstream-model",
  choices: [{ index: 0, delta, finish_reason: finish }]
})
