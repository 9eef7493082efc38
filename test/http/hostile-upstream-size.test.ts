/**
 * One large upstream answer must not freeze the gateway for everyone else, as one large request
 * must not (`hostile-input.test.ts`): whole answers of ~30 MiB (just under the 32 MiB the gateway
 * reads) from an OpenAI-compatible and from an Anthropic placement, in the shapes that cost the
 * most per byte, are answered in full (or, past what any answer holds, refused with a 502) while
 * another client's `GET /v1/models` keeps answering in under 100 ms.
 *
 * Before the fix, on a slow VM (`bench/big-answer.ts`): one huge text held every client for
 * 0.35–0.6 s (`JSON.parse`, `JSON.stringify` and node's encoding, each at once), a `logprobs` list
 * of a million tiny objects 1.3–1.5 s, a million tiny blocks 5–18 s.
 *
 * The gateway runs as a process of its own (in this one, the test's own heap and collections would
 * be measured with it: 170 ms where the gateway alone took 50); the upstream here sends answers
 * built before the window, the answer is read as bytes and checked after it, and the bystander
 * runs in a worker thread.
 */
import { createServer, type Server } from "node:http"
import type { AddressInfo } from "node:net"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type Bystander, startBystander } from "../support/bystander.ts"
import { rmSync } from "node:fs"
import { embeddedDataDir } from "../support/engines.ts"
import { fastConfigEnv } from "../support/fast-config.ts"
import { type GatewayProcess, startGateway } from "../support/gateway-process.ts"
import { createKey, placedOnUpstream } from "../runtime-http/support.ts"

const MIB = 1 << 20
/** Just under what the gateway reads of a whole answer (`MAX_WHOLE_ANSWER_BYTES`, 32 MiB). */
const BUDGET = 30 * MIB

const HUGE_TEXT = "a ".repeat(BUDGET / 2 - 512)

const openaiCompletion = (message: string, extra = "") =>
  `{"id":"chatcmpl-big","object":"chat.completion","created":1767225600,"model":"upstream-pico","choices":[{"index":0,"message":${message}${extra},"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":7,"total_tokens":12}}`
const anthropicMessage = (content: string) =>
  `{"id":"msg_big","type":"message","role":"assistant","model":"upstream-lyra","stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":5,"output_tokens":7},"content":[${content}]}`

/** The answers, by name: each is built once, before any window. */
const ANSWERS: Record<string, () => string> = {
  "openai text": () => openaiCompletion(`{"role":"assistant","content":"${HUGE_TEXT}"}`),
  // 150,000 tiny objects (900,000 values: under MAX_ANSWER_VALUES) in a field the gateway does not pass on.
  "openai logprobs": () =>
    openaiCompletion(`{"role":"assistant","content":"fine"}`, `,"logprobs":{"content":[${new Array(150_000).fill(`{"token":"a","logprob":0,"bytes":[97],"top_logprobs":[]}`).join(",")}]}`),
  "anthropic text": () => anthropicMessage(`{"type":"text","text":"${HUGE_TEXT}"}`),
  // 600,000 tiny blocks (16 MiB: the value limit is reached in half of it, and each retry reads it
  // all): more values than any answer holds, a 502.
  "anthropic blocks": () => anthropicMessage(new Array(600_000).fill(`{"type":"text","text":"a"}`).join(","))
}

describe("a large upstream answer does not hold other clients", () => {
  let upstream: Server
  let answer: Buffer | undefined
  let gw: GatewayProcess
  let dir: string
  let key: string
  let bystander: Bystander

  beforeAll(async () => {
    upstream = createServer((request, response) => {
      request.resume()
      request.on("end", () => {
        response.writeHead(200, { "content-type": "application/json" })
        // Before any window (warm-up): a small answer in the placement's dialect.
        response.end(answer ?? (request.url!.includes("/messages")
          ? anthropicMessage(`{"type":"text","text":"hi"}`)
          : openaiCompletion(`{"role":"assistant","content":"hi"}`)))
      })
    })
    await new Promise<void>((resolve) => upstream.listen(0, "127.0.0.1", resolve))
    dir = embeddedDataDir()
    // Retries of a refused answer at once (the test is about the event loop, not the backoff).
    gw = await startGateway({ GATEWAY_DATA_DIR: dir, GATEWAY_RETRY_BASE_MS: "1", ...fastConfigEnv(dir, placedOnUpstream(`http://127.0.0.1:${(upstream.address() as AddressInfo).port}`)) })
    key = (await createKey(gw)).secret
    // Every surface once on each placement (JIT, first queries), as a running gateway is.
    for (const model of ["svc-pico-1", "svc-lyra-3"]) {
      for (const [path, body] of Object.values(requests(model))) expect((await post(path, body)).status).toBe(200)
    }
    bystander = await startBystander(gw.baseUrl)
  }, 120_000)
  afterAll(async () => {
    await bystander?.stop()
    await gw?.stop()
    if (dir !== undefined) rmSync(dir, { recursive: true, force: true })
    upstream?.closeAllConnections()
    await new Promise((resolve) => upstream?.close(resolve))
  })

  const requests = (model: string) => ({
    chat: ["/v1/chat/completions", { model, max_tokens: 4096, messages: [{ role: "user", content: "go" }] }],
    messages: ["/v1/messages", { model, max_tokens: 4096, messages: [{ role: "user", content: "go" }] }],
    responses: ["/v1/responses", { model, max_output_tokens: 4096, input: "go", store: false }]
  }) as const
  const post = async (path: string, body: unknown) => {
    const res = await fetch(`${gw.baseUrl}${path}`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json", "anthropic-version": "2023-06-01" },
      body: JSON.stringify(body)
    })
    // Its bytes only: decoding 30 MiB to a string is this process's work, in the window.
    return { status: res.status, bytes: Buffer.from(await res.arrayBuffer()) }
  }

  /** What each surface's answer says, read without parsing 30 MiB here (this process's loop is the gateway's). */
  const cases: ReadonlyArray<{ readonly answer: string; readonly model: string; readonly surface: "chat" | "messages" | "responses"; readonly status: number; readonly check: (text: string) => void }> = [
    { answer: "openai text", model: "svc-pico-1", surface: "chat", status: 200, check: (text) => expect(text).toContain(`"content":"${HUGE_TEXT}"`) },
    { answer: "openai logprobs", model: "svc-pico-1", surface: "messages", status: 200, check: (text) => expect(text).toContain(`"text":"fine"`) },
    { answer: "anthropic text", model: "svc-lyra-3", surface: "responses", status: 200, check: (text) => expect(text).toContain(`"text":"${HUGE_TEXT}"`) },
    {
      answer: "anthropic blocks",
      model: "svc-lyra-3",
      surface: "chat",
      status: 502,
      check: (text) => expect(JSON.parse(text).error.message).toContain("The upstream's answer holds more than 1000000 JSON values")
    }
  ]

  it.each(cases)("$answer, asked on $surface: $status", async ({ answer: name, model, surface, status, check }) => {
    answer = Buffer.from(ANSWERS[name]!())
    try {
      const [path, body] = requests(model)[surface]
      let answered: { status: number; bytes: Buffer } | undefined
      await bystander.whileBystanding(async () => {
        answered = await post(path, body)
      })
      const text = answered!.bytes.toString()
      expect(answered!.status, text.slice(0, 300)).toBe(status)
      check(text)
    } finally {
      answer = undefined
    }
  })
})
