/**
 * The request log on the real gateway: one JSON line per request on stdout carrying its facts
 * (request id, key id, surface, models asked and served, status, queue wait, upstream time, tokens,
 * cost), errors with their type and message, `GATEWAY_LOG_LEVEL` filtering — and never a secret:
 * not the key that made the call, not a wrong key that was refused, not the admin token.
 */
import OpenAI from "openai"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { createKey, gatewayWith, placeModel, type TestGateway } from "../runtime-http/support.ts"

type Line = Record<string, unknown>

const jsonLines = (output: string): Array<Line> =>
  output.split("\n").filter((line) => line.startsWith("{")).map((line) => JSON.parse(line) as Line)

/** Waits for the line of one request (lines are written once per event-loop turn, streams at their end). */
const lineOf = async (gw: TestGateway, requestId: string): Promise<Line> => {
  for (let i = 0; i < 200; i++) {
    const line = jsonLines(gw.output()).find((l) => l.msg === "request" && l.request_id === requestId)
    if (line !== undefined) return line
    await new Promise((r) => setTimeout(r, 10))
  }
  throw new Error(`no log line for ${requestId}:\n${gw.output()}`)
}

describe("request log", () => {
  let gw: TestGateway
  let key: { id: string; secret: string }
  let openai: OpenAI

  beforeAll(async () => {
    gw = await gatewayWith((config) => {
      placeModel(config, "svc-lyra-3", [{ id: "lyra-a", capacity: 2 }]) // no equivalents: a fault there is a 5xx
      placeModel(config, "svc-nova-mini", [{ id: "nova-slow", capacity: 4, tokensPerSecond: 20 }]) // a stream that stays open
    }, { GATEWAY_RETRY_BASE_MS: "5", GATEWAY_CIRCUIT_COOLDOWN_MS: "50" }) // the failures below open lyra-a's circuit
    key = await createKey(gw)
    openai = new OpenAI({ apiKey: key.secret, baseURL: `${gw.baseUrl}/v1`, maxRetries: 0 })
  })
  afterAll(async () => {
    await gw?.close()
  })

  it("writes one line per call with its facts, streamed or not", async () => {
    const { data, response } = await openai.chat.completions.create({ model: "gpt-4.1-nano", messages: [{ role: "user", content: "say exactly: logged" }] }).withResponse()
    const line = await lineOf(gw, response.headers.get("x-request-id")!)
    expect(line).toMatchObject({
      level: "info",
      msg: "request",
      method: "POST",
      path: "/v1/chat/completions",
      surface: "chat",
      status: 200,
      key_id: key.id,
      model_asked: "gpt-4.1-nano",
      model: "svc-pico-1",
      served_model: "svc-pico-1",
      placement: "pico-a",
      stream: false,
      attempts: 1,
      input_tokens: data.usage!.prompt_tokens,
      output_tokens: data.usage!.completion_tokens
    })
    expect(Date.parse(line.time as string)).toBeGreaterThan(Date.now() - 60_000)
    for (const field of ["duration_ms", "queue_wait_ms", "upstream_ms", "cost_usd"]) expect(line[field]).toEqual(expect.any(Number))
    expect(line.upstream_ms as number).toBeLessThanOrEqual(line.duration_ms as number)
    expect(line.cost_usd as number).toBeGreaterThan(0)

    const stream = await openai.chat.completions.create({
      model: "svc-atlas-1", stream: true, stream_options: { include_usage: true }, messages: [{ role: "user", content: "say exactly: streamed" }]
    }).withResponse()
    let usage: OpenAI.CompletionUsage | undefined
    for await (const chunk of stream.data) usage = chunk.usage ?? usage
    const streamed = await lineOf(gw, stream.response.headers.get("x-request-id")!)
    expect(streamed).toMatchObject({
      status: 200,
      stream: true,
      model: "svc-atlas-1",
      served_model: "svc-atlas-1",
      input_tokens: usage!.prompt_tokens,
      output_tokens: usage!.completion_tokens
    })
    expect(streamed.ttft_ms).toEqual(expect.any(Number))
  })

  it("logs refusals and failures with their type and message, 5xx at level error", async () => {
    const missing = await fetch(`${gw.baseUrl}/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${key.secret}`, "content-type": "application/json" },
      body: JSON.stringify({ model: "no-such-model", messages: [{ role: "user", content: "x" }] })
    })
    expect(missing.status).toBe(404)
    expect(await lineOf(gw, missing.headers.get("x-request-id")!)).toMatchObject({
      level: "info", status: 404, model_asked: "no-such-model", error_type: "not_found", error_message: "The model 'no-such-model' does not exist"
    })

    await gw.admin("POST", "/admin/v1/placements/lyra-a/faults", { mode: "error", status: 500 })
    const failed = await fetch(`${gw.baseUrl}/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${key.secret}`, "content-type": "application/json" },
      body: JSON.stringify({ model: "lyra", messages: [{ role: "user", content: "x" }] })
    })
    await gw.admin("POST", "/admin/v1/placements/lyra-a/faults", { mode: "none" })
    expect(failed.status).toBeGreaterThanOrEqual(500)
    const line = await lineOf(gw, failed.headers.get("x-request-id")!)
    expect(line).toMatchObject({ level: "error", status: failed.status, model: "svc-lyra-3", error_type: "api_error" })
    expect(line.error_message).toEqual(expect.stringContaining("did not return a response"))
    expect(line.attempts as number).toBeGreaterThan(1)
    expect(line.retries as number).toBe((line.attempts as number) - 1)
  })

  it("logs a stream that broke after its 200 with the error its dialect event carried", async () => {
    await gw.admin("POST", "/admin/v1/placements/lyra-a/faults", { mode: "break-mid-stream", status: 500 })
    const res = await fetch(`${gw.baseUrl}/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${key.secret}`, "content-type": "application/json" },
      body: JSON.stringify({ model: "lyra", stream: true, messages: [{ role: "user", content: "Tell me about the harbor." }] })
    })
    expect(res.status).toBe(200)
    expect(await res.text()).toContain("\"error\"")
    await gw.admin("POST", "/admin/v1/placements/lyra-a/faults", { mode: "none" })
    const line = await lineOf(gw, res.headers.get("x-request-id")!)
    expect(line).toMatchObject({ status: 200, stream: true, model: "svc-lyra-3", error_type: expect.any(String) })
    expect(line.output_tokens as number).toBeGreaterThan(0) // charged what it delivered
  })

  it("logs a stream whose client left midway when it ends: status 200, charged what it delivered", async () => {
    const abort = new AbortController()
    const res = await fetch(`${gw.baseUrl}/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${key.secret}`, "content-type": "application/json" },
      body: JSON.stringify({ model: "svc-nova-mini", stream: true, max_tokens: 400, messages: [{ role: "user", content: "Tell me a long story about the harbor." }] }),
      signal: abort.signal
    })
    expect(res.status).toBe(200)
    const reader = res.body!.getReader()
    // A few frames in (20 tokens a second: the answer has ~20 seconds to go), the client leaves.
    let text = ""
    while ((text.match(/"content":"[^"]/g) ?? []).length < 3) text += new TextDecoder().decode((await reader.read()).value)
    abort.abort()
    const line = await lineOf(gw, res.headers.get("x-request-id")!)
    expect(line).toMatchObject({ status: 200, stream: true, model: "svc-nova-mini" })
    expect(line.output_tokens as number).toBeGreaterThan(0)
    expect(line.cost_usd as number).toBeGreaterThan(0)
    expect(line.duration_ms as number).toBeLessThan(10_000)
  })

  it("never logs a secret: not the caller's key, a refused key or the admin token", async () => {
    const wrong = `svc_${"x".repeat(40)}`
    const refused = await fetch(`${gw.baseUrl}/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${wrong}`, "content-type": "application/json" },
      body: JSON.stringify({ model: "pico", messages: [{ role: "user", content: "x" }] })
    })
    expect(refused.status).toBe(401)
    const line = await lineOf(gw, refused.headers.get("x-request-id")!)
    expect(line).toMatchObject({ status: 401, error_type: "authentication_error" })
    expect(line.key_id).toBeUndefined()
    await openai.embeddings.create({ model: "text-embedding-3-small", input: "secret-free" })
    const output = gw.output()
    expect(jsonLines(output).filter((l) => l.msg === "request").length).toBeGreaterThanOrEqual(5)
    expect(output).not.toContain(key.secret)
    expect(output).not.toContain(wrong)
    expect(output).not.toContain(gw.adminToken)
  })
})

describe("GATEWAY_LOG_LEVEL", () => {
  let gw: TestGateway
  afterAll(async () => {
    await gw?.close()
  })

  it("warn: successful requests are not logged, failed ones are", async () => {
    gw = await gatewayWith((config) => {
      placeModel(config, "svc-lyra-3", [{ id: "lyra-a", capacity: 2 }])
    }, { GATEWAY_LOG_LEVEL: "warn", GATEWAY_RETRY_BASE_MS: "5" })
    const openai = new OpenAI({ apiKey: gw.apiKey!, baseURL: `${gw.baseUrl}/v1`, maxRetries: 0 })
    const ok = await openai.chat.completions.create({ model: "pico", messages: [{ role: "user", content: "quiet" }] }).withResponse()
    await gw.admin("POST", "/admin/v1/placements/lyra-a/faults", { mode: "error", status: 500 })
    const failed = await openai.chat.completions.create({ model: "lyra", messages: [{ role: "user", content: "loud" }] }).withResponse().catch((e: { headers: Headers }) => e)
    const failedId = (failed as { headers: Headers }).headers.get("x-request-id")!
    expect((await lineOf(gw, failedId)).level).toBe("error")
    const okId = ok.response.headers.get("x-request-id")!
    expect(jsonLines(gw.output()).some((l) => l.request_id === okId)).toBe(false)
  })
})
