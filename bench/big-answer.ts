/**
 * How long one large upstream answer holds the gateway's event loop: whole (non-streamed) answers
 * of up to `MAX_WHOLE_ANSWER_BYTES` (32 MiB) from an OpenAI-compatible and from an Anthropic
 * placement, in the shapes that cost the most per byte, asked for on each chat surface, while a
 * bystander asks `GET /v1/models` every 5 ms. No assertions: it prints figures (`big-body.ts` does
 * the same for large requests).
 *
 *   node bench/big-answer.ts [--reps 2] [--mib 30] [--backend openai,anthropic] [--surface chat,messages,responses]
 *                            [--shape idle,text,args,many] [--stream] [--prof DIR] [--node-args "--trace-gc"] [--env NAME=VALUE]…
 *
 * Shapes: `text` one huge text; `args` a tool call whose arguments hold ~15M tiny values (from an
 * OpenAI-compatible server a JSON string, from Anthropic an `input` object); `many` ~1M tiny
 * objects in a field the gateway does not read (`logprobs.content`; Anthropic: many tiny text
 * blocks). `--stream`: the client streams, and the upstream sends the same answer as SSE in 64 KiB
 * pieces (a tool call's arguments in many deltas).
 *
 * The gateway runs on core 0 with the loop probe, the upstream (in this process) and the bystander
 * (a worker thread) on core 1. Per request: status, wall time, the gateway's worst event-loop delay
 * (`loopMaxMs`), the most CPU its main thread spent between two ticks of a 2 ms timer (`cpuMaxMs`)
 * and the bystander's slowest answer (`bystanderMaxMs`).
 */
import { mkdtempSync } from "node:fs"
import { createServer, type IncomingMessage, type ServerResponse } from "node:http"
import type { AddressInfo } from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { parseArgs } from "node:util"
import { startBystander } from "./lib/bystander.ts"
import { benchChatModel } from "./lib/catalog.ts"
import { pin, startProbedGateway, stopAll } from "./lib/procs.ts"

const { values } = parseArgs({
  options: {
    reps: { type: "string", default: "2" },
    mib: { type: "string", default: "30" },
    backend: { type: "string", default: "openai,anthropic" },
    surface: { type: "string", default: "chat,messages,responses" },
    shape: { type: "string", default: "idle,text,args,many" },
    stream: { type: "boolean", default: false },
    prof: { type: "string" },
    "node-args": { type: "string", default: "" },
    env: { type: "string", multiple: true, default: [] }
  }
})

const MIB = 1 << 20
const budget = Math.floor(Number(values.mib) * MIB)
type Backend = "openai" | "anthropic"
type Shape = "idle" | "text" | "args" | "many"
type Surface = "chat" | "messages" | "responses"

/** `head + item,item,… + tail` filling the budget, built as a string (no JSON.stringify of a huge value). */
const fill = (head: string, item: string, tail: string) => head + Array.from({ length: Math.floor((budget - head.length - tail.length) / (item.length + 1)) }, () => item).join(",") + tail

/** The pieces of one answer: its whole JSON, or its SSE events. */
interface Answer {
  readonly whole: string
  readonly events: ReadonlyArray<string>
}

const PIECE = 64 * 1024
const piecesOf = (text: string) => Array.from({ length: Math.ceil(text.length / PIECE) }, (_, i) => text.slice(i * PIECE, (i + 1) * PIECE))

const openaiAnswer = (shape: Shape): Answer => {
  const head = `{"id":"chatcmpl-big","object":"chat.completion","created":1767225600,"model":"fixed","choices":[{"index":0,`
  const usage = `"usage":{"prompt_tokens":5,"completion_tokens":7,"total_tokens":12}}`
  const chunk = (delta: string, finish: string | null = null, extra = "") =>
    `{"id":"chatcmpl-big","object":"chat.completion.chunk","created":1767225600,"model":"fixed","choices":[{"index":0,"delta":${delta}${extra},"finish_reason":${finish === null ? "null" : `"${finish}"`}}]}`
  const end = (finish: string) => [chunk("{}", finish), `{"id":"chatcmpl-big","object":"chat.completion.chunk","created":1767225600,"model":"fixed","choices":[],${usage.slice(0, -1)}}`]
  switch (shape) {
    case "text": {
      const text = "a ".repeat(Math.floor(budget / 2) - 256)
      return {
        whole: `${head}"message":{"role":"assistant","content":"${text}"},"finish_reason":"stop"}],${usage}`,
        events: [chunk(`{"role":"assistant","content":""}`), ...piecesOf(text).map((piece) => chunk(`{"content":"${piece}"}`)), ...end("stop")]
      }
    }
    case "args": {
      // The arguments are a JSON string: `{\"v\":[0,0,…]}`.
      const args = fill(`{\\"v\\":[`, "0", `]}`)
      return {
        whole: `${head}"message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"f","arguments":"${args}"}}]},"finish_reason":"tool_calls"}],${usage}`,
        events: [
          chunk(`{"role":"assistant","tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"f","arguments":""}}]}`),
          ...piecesOf(args).map((piece) => chunk(`{"tool_calls":[{"index":0,"function":{"arguments":"${piece.endsWith("\\") ? `${piece}\\` : piece}"}}]}`)),
          ...end("tool_calls")
        ]
      }
    }
    case "many": {
      const logprobs = fill(`"logprobs":{"content":[`, `{"token":"a","logprob":0,"bytes":[97],"top_logprobs":[]}`, `]}`)
      return {
        whole: `${head}"message":{"role":"assistant","content":"a"},${logprobs},"finish_reason":"stop"}],${usage}`,
        events: [chunk(`{"role":"assistant","content":"a"}`, null, `,${logprobs}`), ...end("stop")]
      }
    }
    case "idle":
      throw new Error("no answer for idle")
  }
}

const anthropicAnswer = (shape: Shape): Answer => {
  const head = `{"id":"msg_big","type":"message","role":"assistant","model":"fixed","stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":5,"output_tokens":7},"content":[`
  const sse = (type: string, data: string) => `event: ${type}\ndata: ${data}`
  const start = sse("message_start", `{"type":"message_start","message":{"id":"msg_big","type":"message","role":"assistant","model":"fixed","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":5,"output_tokens":1}}}`)
  const stop = (reason: string) => [
    sse("message_delta", `{"type":"message_delta","delta":{"stop_reason":"${reason}","stop_sequence":null},"usage":{"output_tokens":7}}`),
    sse("message_stop", `{"type":"message_stop"}`)
  ]
  switch (shape) {
    case "text": {
      const text = "a ".repeat(Math.floor(budget / 2) - 256)
      return {
        whole: `${head}{"type":"text","text":"${text}"}]}`,
        events: [start, sse("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`),
          ...piecesOf(text).map((piece) => sse("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"${piece}"}}`)),
          sse("content_block_stop", `{"type":"content_block_stop","index":0}`), ...stop("end_turn")]
      }
    }
    case "args": {
      const input = fill(`{"v":[`, "0", `]}`)
      const escaped = input.replaceAll(`"`, `\\"`)
      return {
        whole: `${head}{"type":"tool_use","id":"toolu_1","name":"f","input":${input}}]}`.replace(`"end_turn"`, `"tool_use"`),
        events: [start, sse("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_1","name":"f","input":{}}}`),
          ...piecesOf(escaped).map((piece) => sse("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"${piece.endsWith("\\") ? `${piece}\\` : piece}"}}`)),
          sse("content_block_stop", `{"type":"content_block_stop","index":0}`), ...stop("tool_use")]
      }
    }
    case "many": {
      const blocks = fill("", `{"type":"text","text":"a"}`, "")
      return { whole: `${head}${blocks}]}`, events: [] }
    }
    case "idle":
      throw new Error("no answer for idle")
  }
}

let current: Answer | undefined
const upstreamServer = createServer((request: IncomingMessage, response: ServerResponse) => {
  let body = ""
  request.on("data", (chunk: Buffer) => (body += chunk.toString()))
  request.on("end", () => {
    const streamed = /"stream"\s*:\s*true/.test(body)
    const answer = current
    if (answer === undefined || body.includes(`"hi"`)) {
      const anthropic = request.url!.includes("/messages")
      const small = anthropic ? anthropicSmall : openaiSmall
      response.writeHead(200, { "content-type": streamed ? "text/event-stream" : "application/json" })
      return response.end(streamed ? small.events.map((e) => anthropic ? `${e}\n\n` : `data: ${e}\n\n`).join("") : small.whole)
    }
    if (!streamed) {
      response.writeHead(200, { "content-type": "application/json" })
      return response.end(answer.whole)
    }
    response.writeHead(200, { "content-type": "text/event-stream" })
    const anthropic = request.url!.includes("/messages")
    for (const event of answer.events) response.write(anthropic ? `${event}\n\n` : `data: ${event}\n\n`)
    response.end(anthropic ? "" : "data: [DONE]\n\n")
  })
})
const openaiSmall: Answer = {
  whole: `{"id":"chatcmpl-1","object":"chat.completion","created":1767225600,"model":"fixed","choices":[{"index":0,"message":{"role":"assistant","content":"hello"},"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":1,"total_tokens":6}}`,
  events: [
    `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1767225600,"model":"fixed","choices":[{"index":0,"delta":{"role":"assistant","content":"hello"},"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":1,"total_tokens":6}}`,
    "[DONE]"
  ]
}
const anthropicSmall: Answer = {
  whole: `{"id":"msg_1","type":"message","role":"assistant","model":"fixed","stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":5,"output_tokens":1},"content":[{"type":"text","text":"hello"}]}`,
  events: [
    `event: message_start\ndata: {"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"fixed","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":5,"output_tokens":1}}}`,
    `event: content_block_start\ndata: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":"hello"}}`,
    `event: content_block_stop\ndata: {"type":"content_block_stop","index":0}`,
    `event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":1}}`,
    `event: message_stop\ndata: {"type":"message_stop"}`
  ]
}


const PATHS: Record<Surface, string> = { chat: "/v1/chat/completions", messages: "/v1/messages", responses: "/v1/responses" }
const requestFor = (surface: Surface, model: string) => {
  const stream = values.stream ? `,"stream":true` : ""
  const tools = surface === "messages"
    ? `,"tools":[{"name":"f","input_schema":{"type":"object"}}]`
    : surface === "chat"
    ? `,"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}]`
    : `,"tools":[{"type":"function","name":"f","parameters":{"type":"object"}}]`
  return surface === "responses"
    ? `{"model":"${model}","input":"go","store":false${stream}${tools}}`
    : `{"model":"${model}","max_tokens":4096,"messages":[{"role":"user","content":"go"}]${stream}${tools}}`
}

const logDir = mkdtempSync(join(tmpdir(), "big-answer-"))
pin(process.pid, 1)
await new Promise<void>((resolve) => upstreamServer.listen(0, "127.0.0.1", resolve))
const upstreamUrl = `http://127.0.0.1:${(upstreamServer.address() as AddressInfo).port}`
const modelOn = (id: string, backend: string) => ({
  ...benchChatModel(id, id, [{ id: `${id}-up`, backend, capacity: 1000, baseUrl: backend === "anthropic" ? upstreamUrl : `${upstreamUrl}/v1`, upstreamModel: "fixed" }]),
  capabilities: { tools: true, reasoning: false, vision: false, documents: false },
  // Output far above any real model's, so the gateway's runaway guard does not end the answer.
  maxOutput: 1_000_000_000,
  supportedParameters: ["messages", "max_tokens", "stream", "tools"]
})
const gateway = await startProbedGateway(logDir, [modelOn("svc-openai", "openai-compatible"), modelOn("svc-anthropic", "anthropic")], { prof: values.prof, nodeArgs: values["node-args"], env: values.env })
console.log(`logs: ${logDir}`)
const bystander = startBystander(gateway.url)
try {
  const key = await gateway.createKey("bench", "bench")
  const headers = { authorization: `Bearer ${key}`, "content-type": "application/json", "anthropic-version": "2023-06-01" }
  const backends = values.backend.split(",") as Array<Backend>
  const surfaces = values.surface.split(",") as Array<Surface>
  // Warm every surface on every backend (JIT, first queries).
  for (const backend of backends) {
    for (const surface of surfaces) {
      const warm = requestFor(surface, `svc-${backend}`).replace(`"go"`, `"hi"`)
      for (let i = 0; i < 20; i++) await (await fetch(`${gateway.url}${PATHS[surface]}`, { method: "POST", headers, body: warm })).text()
    }
  }
  for (let rep = 0; rep < Number(values.reps); rep++) {
    for (const backend of backends) {
      for (const shape of values.shape.split(",") as Array<Shape>) {
        for (const surface of surfaces) {
          await new Promise((resolve) => setTimeout(resolve, 200))
          if (shape === "idle") {
            if (surface !== surfaces[0] || backend !== backends[0]) continue
            await gateway.loopDelay()
            await bystander.collect()
            await new Promise((resolve) => setTimeout(resolve, 1000))
          } else {
            current = backend === "openai" ? openaiAnswer(shape) : anthropicAnswer(shape)
            if (values.stream && current.events.length === 0) continue
            await gateway.loopDelay()
            await bystander.collect()
          }
          const started = performance.now()
          const res = shape === "idle" ? undefined : await fetch(`${gateway.url}${PATHS[surface]}`, { method: "POST", headers, body: requestFor(surface, `svc-${backend}`) })
          const text = res === undefined ? "" : await res.text()
          const wallMs = performance.now() - started
          await new Promise((resolve) => setTimeout(resolve, 50))
          const loop = await gateway.loopDelay()
          const seen = await bystander.collect()
          console.log(JSON.stringify({
            rep, backend, shape, surface, stream: values.stream,
            status: res?.status ?? 0,
            answerMiB: +((current?.whole.length ?? 0) / MIB).toFixed(1),
            bytesOut: text.length,
            wallMs: Math.round(wallMs),
            loopMaxMs: loop === undefined ? null : +(loop.max / 1000).toFixed(1),
            cpuMaxMs: loop?.cpuMax === undefined ? null : +(loop.cpuMax / 1000).toFixed(1),
            bystanderMaxMs: +seen.worst.toFixed(1),
            bystanderN: seen.count,
            ...(res !== undefined && res.status >= 400 ? { error: text.slice(0, 200) } : {})
          }))
          current = undefined
        }
      }
    }
  }
} finally {
  await bystander.stop()
  await gateway.stop()
  await stopAll()
  upstreamServer.close()
}
