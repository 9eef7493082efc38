/**
 * How long one large request holds the gateway's event loop: bodies of up to the default
 * `GATEWAY_MAX_BODY_BYTES` (32 MiB) on each chat surface, in the shapes that cost the most per
 * byte, while a bystander asks `GET /v1/models` every 5 ms. No assertions: it prints figures.
 *
 *   node bench/big-body.ts [--reps 2] [--mib 32] [--surface chat,messages,responses,completions]
 *                          [--shape idle,many,string,wide,cap,key] [--prof DIR] [--node-args "--trace-gc"] [--env NAME=VALUE]…
 *
 * Shapes: `many` ~1M tiny messages / input items / prompts; `string` one huge string in the
 * prompt; `wide` one object with ~1M keys (a tool's parameter schema); `cap` as many tiny
 * messages as fit under the 65,536-value limit (~21,800, 0.6 MiB: accepted, so every pass after
 * the parse runs on them); `key` one object key as long as the body allows (`metadata`); `echo`
 * on Responses a streamed, stored create whose `instructions` fill the body — every envelope
 * frame (`response.created`, `.in_progress`, `.completed`) repeats them — followed by a second
 * line, `replay`, for `GET /v1/responses/{id}?stream=true` of what it stored; on legacy completions
 * a streamed `echo: true` whose prompt fills the body (its first chunk carries the prompt). The gateway runs on core 0 with the loop probe (bench/lib/loop-probe.ts),
 * the fixed-answer upstream and this process on core 1; the bystander runs in a worker thread of
 * this process so building and sending 32 MiB here never counts as the gateway's delay.
 *
 * Per request it prints: status, wall time, the gateway's worst event-loop delay while it ran
 * (`loopMaxMs`, from the probe: a 10 ms timer, so shorter stalls read as ~0–1 ms), the most CPU
 * its main thread spent between two ticks of a 2 ms timer (`cpuMaxMs`: the longest stretch the
 * loop worked without a break, which time spent waiting for a core on a busy machine does not
 * inflate) and the bystander's slowest answer (`bystanderMaxMs`, a round trip, ~1 ms at best).
 * `idle` measures one second without a request: the machine's own noise in the same figures.
 */
import { mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { parseArgs } from "node:util"
import { startBystander } from "./lib/bystander.ts"
import { benchChatModel } from "./lib/catalog.ts"
import { pin, startFixed, startProbedGateway, stopAll } from "./lib/procs.ts"

const { values } = parseArgs({
  options: {
    reps: { type: "string", default: "2" },
    mib: { type: "string", default: "32" },
    surface: { type: "string", default: "chat,messages,responses,completions" },
    shape: { type: "string", default: "idle,many,string,wide,cap" },
    prof: { type: "string" },
    "node-args": { type: "string", default: "" },
    env: { type: "string", multiple: true, default: [] }
  }
})

const MIB = 1 << 20
/** Just under the limit, leaving room for the envelope. */
const budget = Math.floor(Number(values.mib) * MIB) - 4096

/** `[first, item, item, …]` joined to fill the budget: built once as a string, not via JSON.stringify of a huge array. */
const fill = (head: string, item: string, tail: string) => {
  const n = Math.floor((budget - head.length - tail.length) / (item.length + 1))
  return { body: head + Array.from({ length: n }, () => item).join(",") + tail, count: n }
}

/** `{"k0":{"type":"string"},"k1":…}`: an object with as many keys as fit. */
const wideObject = (head: string, tail: string) => {
  const parts: Array<string> = []
  let size = head.length + tail.length
  for (let i = 0; size < budget - 64; i++) {
    const part = `"k${i}":{"type":"string"}`
    parts.push(part)
    size += part.length + 1
  }
  return { body: head + parts.join(",") + tail, count: parts.length }
}

/** Just under the 65,536-value limit: three values a message, a few for the envelope. */
const atCap = (head: string, item: string, tail: string, perItem = 3) => {
  const n = Math.floor((65_536 - 16) / perItem)
  return { body: head + Array.from({ length: n }, () => item).join(",") + tail, count: n }
}

const hugeString = (head: string, tail: string) => {
  const n = budget - head.length - tail.length
  return { body: head + "a ".repeat(n / 2) + tail, count: n }
}

/** One object key of the whole budget in `metadata` (refused at 131,072 characters since 2026-12-03). */
const hugeKey = (head: string) => {
  const n = budget - head.length - 16
  return { body: `${head},"metadata":{"${"k".repeat(n)}":"v"}}`, count: n }
}

type Shape = "many" | "string" | "wide" | "cap" | "key" | "echo" | "idle"
type Surface = "chat" | "messages" | "responses" | "completions"

const PATHS: Record<Surface, string> = {
  chat: "/v1/chat/completions",
  messages: "/v1/messages",
  responses: "/v1/responses",
  completions: "/v1/completions"
}

const bodyFor = (surface: Surface, shape: Shape): { body: string; count: number } | undefined => {
  const model = `"model":"svc-big"`
  if (shape === "key") return hugeKey(`{${model},"max_tokens":16`)
  if (shape === "echo") return surface === "responses" ? hugeString(`{${model},"max_output_tokens":16,"stream":true,"store":true,"input":"hi","instructions":"`, `"}`) : surface === "completions" ? hugeString(`{${model},"max_tokens":16,"echo":true,"stream":true,"prompt":"`, `"}`) : undefined
  switch (surface) {
    case "chat":
      if (shape === "cap") return atCap(`{${model},"max_tokens":16,"messages":[`, `{"role":"user","content":"a"}`, `]}`)
      if (shape === "many") return fill(`{${model},"max_tokens":16,"messages":[`, `{"role":"user","content":"a"}`, `]}`)
      if (shape === "string") return hugeString(`{${model},"max_tokens":16,"messages":[{"role":"user","content":"`, `"}]}`)
      return wideObject(
        `{${model},"max_tokens":16,"messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{`,
        `}}}}]}`
      )
    case "messages":
      if (shape === "cap") return atCap(`{${model},"max_tokens":16,"messages":[`, `{"role":"user","content":"a"}`, `]}`)
      if (shape === "many") return fill(`{${model},"max_tokens":16,"messages":[`, `{"role":"user","content":"a"}`, `]}`)
      if (shape === "string") return hugeString(`{${model},"max_tokens":16,"messages":[{"role":"user","content":"`, `"}]}`)
      return wideObject(
        `{${model},"max_tokens":16,"messages":[{"role":"user","content":"hi"}],"tools":[{"name":"f","input_schema":{"type":"object","properties":{`,
        `}}}]}`
      )
    case "responses":
      if (shape === "cap") return atCap(`{${model},"max_output_tokens":16,"store":false,"input":[`, `{"role":"user","content":"a"}`, `]}`)
      if (shape === "many") return fill(`{${model},"max_output_tokens":16,"input":[`, `{"role":"user","content":"a"}`, `]}`)
      if (shape === "string") return hugeString(`{${model},"max_output_tokens":16,"input":"`, `"}`)
      return wideObject(
        `{${model},"max_output_tokens":16,"input":"hi","tools":[{"type":"function","name":"f","parameters":{"type":"object","properties":{`,
        `}}}]}`
      )
    case "completions":
      if (shape === "cap") return undefined
      if (shape === "many") return fill(`{${model},"max_tokens":16,"prompt":[`, `"a"`, `]}`)
      if (shape === "string") return hugeString(`{${model},"max_tokens":16,"prompt":"`, `"}`)
      return undefined
  }
}


const logDir = mkdtempSync(join(tmpdir(), "big-body-"))
pin(process.pid, 1)
const upstream = await startFixed(logDir, "fixed", { ttftMs: 0, gapMs: 0 }, 1)
const model = {
  ...benchChatModel("svc-big", "big", [{ id: "big-up", backend: "openai-compatible", capacity: 1000, baseUrl: `${upstream.url}/v1`, upstreamModel: "fixed" }]),
  // Large enough that a 32 MiB prompt is dispatched, so every pass up to the upstream call runs.
  contextWindow: 1_000_000_000,
  capabilities: { tools: true, reasoning: false, vision: false, documents: false },
  supportedParameters: ["messages", "max_tokens", "stream", "tools"]
}
const gateway = await startProbedGateway(logDir, [model], { prof: values.prof, nodeArgs: values["node-args"], env: values.env })
console.log(`logs: ${logDir}`)
const bystander = startBystander(gateway.url)
try {
  const key = await gateway.createKey("bench", "bench")
  const headers = { authorization: `Bearer ${key}`, "content-type": "application/json", "anthropic-version": "2023-06-01" }
  // Warm every surface once with a small body (JIT, first queries).
  for (const surface of Object.keys(PATHS) as Array<Surface>) {
    const small = surface === "responses" ? `{"model":"svc-big","input":"hi"}` : surface === "completions" ? `{"model":"svc-big","prompt":"hi"}` : `{"model":"svc-big","max_tokens":16,"messages":[{"role":"user","content":"hi"}]}`
    for (let i = 0; i < 20; i++) await (await fetch(`${gateway.url}${PATHS[surface]}`, { method: "POST", headers, body: small })).text()
  }
  const surfaces = values.surface.split(",") as Array<Surface>
  const shapes = values.shape.split(",") as Array<Shape>
  for (let rep = 0; rep < Number(values.reps); rep++) {
    for (const surface of surfaces) {
      for (const shape of shapes) {
        // `idle`: no request for a second, once per round — what the machine alone does to the figures.
        if (shape === "idle") {
          if (surface !== surfaces[0]) continue
          await new Promise((resolve) => setTimeout(resolve, 200))
          await gateway.loopDelay()
          await bystander.collect()
          await new Promise((resolve) => setTimeout(resolve, 1000))
          const loop = await gateway.loopDelay()
          const seen = await bystander.collect()
          console.log(JSON.stringify({
            rep, surface: "-", shape, status: 0, wallMs: 1000,
            loopMaxMs: loop === undefined ? null : +(loop.max / 1000).toFixed(1),
            cpuMaxMs: loop?.cpuMax === undefined ? null : +(loop.cpuMax / 1000).toFixed(1),
            bystanderMaxMs: +seen.worst.toFixed(1), bystanderN: seen.count
          }))
          continue
        }
        const built = bodyFor(surface, shape)
        if (built === undefined) continue
        const body = Buffer.from(built.body)
        /** Sends one request and prints its figures; resolves the answer's text. */
        const measure = async (label: Shape | "replay", path: string, init: RequestInit, bodyMiB: number) => {
          await new Promise((resolve) => setTimeout(resolve, 200))
          await gateway.loopDelay()
          await bystander.collect()
          const started = performance.now()
          const res = await fetch(`${gateway.url}${path}`, init)
          const text = await res.text()
          const wallMs = performance.now() - started
          // Let a stall that began as the answer left show in the probe's next sample.
          await new Promise((resolve) => setTimeout(resolve, 50))
          const loop = await gateway.loopDelay()
          const seen = await bystander.collect()
          console.log(JSON.stringify({
            rep,
            surface,
            shape: label,
            bodyMiB,
            count: built.count,
            status: res.status,
            wallMs: Math.round(wallMs),
            answerMiB: +(text.length / MIB).toFixed(1),
            loopMaxMs: loop === undefined ? null : +(loop.max / 1000).toFixed(1),
            cpuMaxMs: loop?.cpuMax === undefined ? null : +(loop.cpuMax / 1000).toFixed(1),
            bystanderMaxMs: +seen.worst.toFixed(1),
            bystanderN: seen.count,
            ...(res.status >= 400 ? { error: text.slice(0, 160) } : {})
          }))
          return text
        }
        const text = await measure(shape, PATHS[surface], { method: "POST", headers, body }, +(body.length / MIB).toFixed(1))
        const id = shape === "echo" ? /"id":"(resp_[^"]+)"/.exec(text)?.[1] : undefined
        if (id !== undefined) await measure("replay", `/v1/responses/${id}?stream=true`, { headers }, 0)
      }
    }
  }
} finally {
  await bystander.stop()
  await gateway.stop()
  await stopAll()
}
