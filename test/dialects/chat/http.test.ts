/**
 * Chat Completions errors through the `openai` SDK (each status reaches the SDK as its error class,
 * in the OpenAI shape) and the raw SSE text a non-SDK client reads.
 */
import OpenAI from "openai"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { engines, inOrder } from "../../support/engines.ts"
import { fastConfigEnv } from "../../support/fast-config.ts"
import type { GatewayHandle } from "../../support/gateway-process.ts"
import { startInProcessGateway } from "../../support/in-process-gateway.ts"
import { sseFrames } from "./support.ts"

const PNG = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
const hi: Array<OpenAI.Chat.ChatCompletionMessageParam> = [{ role: "user", content: "say exactly: hi" }]

/** The rejection of a call, as the SDK throws it. */
const rejection = async (call: Promise<unknown>): Promise<InstanceType<typeof OpenAI.APIError>> => {
  try {
    await call
  } catch (error) {
    if (error instanceof OpenAI.APIError) return error
    throw error
  }
  throw new Error("expected the call to fail")
}

describe.concurrent.each(engines())("chat completions errors and raw SSE ($name)", (engine) => {
  let gw: GatewayHandle
  let client: OpenAI
  let cleanup: () => Promise<void>
  beforeAll(async () => {
    const setup = await engine.setup()
    cleanup = setup.cleanup
    // The preview model's only placement is Anthropic-backed: it cannot guarantee a strict schema.
    const env = fastConfigEnv(setup.env.GATEWAY_DATA_DIR, (config) => {
      config.models.find((m: { id: string }) => m.id === "svc-atlas-2-preview").placements = [
        { id: "atlas-next-anthropic", backend: "anthropic", baseUrl: "http://127.0.0.1:9", upstreamModel: "x", capacity: 1 }
      ]
    })
    gw = await startInProcessGateway({ ...setup.env, ...env })
    client = new OpenAI({ apiKey: gw.apiKey, baseURL: `${gw.baseUrl}/v1`, maxRetries: 0 })
  })
  afterAll(async () => {
    await gw?.stop()
    await cleanup?.()
  })

  const post = (body: unknown, key = gw.apiKey) =>
    fetch(`${gw.baseUrl}/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify(body)
    })

  it("a whole answer: JSON with its length (not chunked), the request id, the serving model and the limits", inOrder, async () => {
    const res = await post({ model: "svc-nova-mini", max_tokens: 8, messages: [{ role: "user", content: "hi ✓" }] })
    expect(res.status).toBe(200)
    const bytes = new Uint8Array(await res.arrayBuffer())
    expect(res.headers.get("content-type")).toBe("application/json")
    expect(res.headers.get("content-length")).toBe(String(bytes.length))
    expect(res.headers.get("transfer-encoding")).toBeNull()
    expect(res.headers.get("x-request-id")).toMatch(/^req_/)
    expect(res.headers.get("request-id")).toBe(res.headers.get("x-request-id"))
    expect(res.headers.get("xsvc-model")).toBe("svc-nova-mini")
    expect(res.headers.get("x-ratelimit-limit-requests")).not.toBeNull()
    expect(JSON.parse(new TextDecoder().decode(bytes))).toMatchObject({ object: "chat.completion", model: "svc-nova-mini" })
  })

  it("422 for a strict json_schema on a model whose only placement cannot guarantee it", inOrder, async () => {
    const error = await rejection(client.chat.completions.create({
      model: "svc-atlas-2-preview",
      messages: hi,
      response_format: { type: "json_schema", json_schema: { name: "x", schema: { type: "object" }, strict: true } }
    }))
    expect(error).toBeInstanceOf(OpenAI.UnprocessableEntityError)
    expect(error.type).toBe("invalid_request_error")
    expect(error.param).toBe("response_format")
  })

  it("400 for an image sent to a model without vision, and for fields that fail validation", inOrder, async () => {
    const image = await rejection(client.chat.completions.create({
      model: "svc-pico-1",
      messages: [{ role: "user", content: [{ type: "text", text: "what is this?" }, { type: "image_url", image_url: { url: PNG } }] }]
    }))
    expect(image).toBeInstanceOf(OpenAI.BadRequestError)
    expect(image.type).toBe("invalid_request_error")
    const badUrl = await rejection(client.chat.completions.create({
      model: "svc-nova-mini",
      messages: [{ role: "user", content: [{ type: "image_url", image_url: { url: "ftp://nope" } }] }]
    }))
    expect(badUrl).toBeInstanceOf(OpenAI.BadRequestError)
    expect(badUrl.param).toBe("messages[0].content[0].image_url.url")
    const n = await rejection(client.chat.completions.create({ model: "svc-nova-mini", messages: hi, n: 2 }))
    expect(n.param).toBe("n")
  })

  it("401 authentication_error for a missing or invalid key", inOrder, async () => {
    const wrong = new OpenAI({ apiKey: "svc_not_a_key", baseURL: `${gw.baseUrl}/v1`, maxRetries: 0 })
    const error = await rejection(wrong.chat.completions.create({ model: "svc-nova-mini", messages: hi }))
    expect(error).toBeInstanceOf(OpenAI.AuthenticationError)
    expect(error.type).toBe("authentication_error")
    const missing = await fetch(`${gw.baseUrl}/v1/chat/completions`, { method: "POST", body: "{}" })
    expect(missing.status).toBe(401)
    expect((await missing.json() as any).error).toMatchObject({ type: "authentication_error", param: null, code: null })
  })

  it("403 permission_error for a key limited to other surfaces or models", inOrder, async () => {
    const messagesOnly = (await (await gw.admin("POST", "/admin/v1/keys", { permissions: { surfaces: ["messages"] } })).json() as any).key
    const limited = new OpenAI({ apiKey: messagesOnly, baseURL: `${gw.baseUrl}/v1`, maxRetries: 0 })
    const error = await rejection(limited.chat.completions.create({ model: "svc-nova-mini", messages: hi }))
    expect(error).toBeInstanceOf(OpenAI.PermissionDeniedError)
    expect(error.type).toBe("permission_error")
    const picoOnly = (await (await gw.admin("POST", "/admin/v1/keys", { permissions: { models: ["svc-pico-*"] } })).json() as any).key
    const modelLimited = new OpenAI({ apiKey: picoOnly, baseURL: `${gw.baseUrl}/v1`, maxRetries: 0 })
    expect(await rejection(modelLimited.chat.completions.create({ model: "gpt-4o-mini", messages: hi }))).toBeInstanceOf(OpenAI.PermissionDeniedError)
    expect((await modelLimited.chat.completions.create({ model: "pico", messages: hi })).choices[0].message.content).toBe("hi")
  })

  it("404 not_found for an unknown model", inOrder, async () => {
    const error = await rejection(client.chat.completions.create({ model: "gpt-9-ultra", messages: hi }))
    expect(error).toBeInstanceOf(OpenAI.NotFoundError)
    expect(error.type).toBe("not_found")
    expect(error.param).toBe("model")
  })

  it("streams data-only SSE: no event lines, one id, usage chunk shape, [DONE] last", inOrder, async () => {
    const res = await post({ model: "svc-nova-mini", messages: hi, stream: true, stream_options: { include_usage: true } })
    expect(res.status).toBe(200)
    expect(res.headers.get("content-type")).toContain("text/event-stream")
    expect(res.headers.get("x-request-id")).toMatch(/^req_/)
    const text = await res.text()
    expect(text).not.toMatch(/^event:/m)
    expect(text.endsWith("data: [DONE]\n\n")).toBe(true)
    const frames = sseFrames(text)
    expect(frames.every((frame) => frame.data !== undefined)).toBe(true)
    const chunks = frames.slice(0, -1).map((frame) => frame.data)
    expect(new Set(chunks.map((chunk) => chunk.id)).size).toBe(1)
    expect(chunks[0].choices[0].delta).toEqual({ role: "assistant", content: "", refusal: null })
    const usage = chunks.at(-1)
    expect(usage.choices).toEqual([])
    expect(Object.keys(usage.usage).sort()).toEqual(["completion_tokens", "completion_tokens_details", "prompt_tokens", "prompt_tokens_details", "total_tokens"])
    expect(chunks.at(-2).choices[0]).toMatchObject({ delta: {}, finish_reason: "stop" })
    expect(chunks.slice(0, -1).every((chunk) => chunk.usage === null)).toBe(true)
  })

  it("without include_usage sends no usage chunk; errors before the stream are proper statuses", inOrder, async () => {
    const text = await (await post({ model: "svc-nova-mini", messages: hi, stream: true })).text()
    const chunks = sseFrames(text).slice(0, -1).map((frame) => frame.data)
    expect(chunks.every((chunk) => chunk.choices.length === 1 && !("usage" in chunk))).toBe(true)
    const bad = await post({ model: "svc-nova-mini", messages: [{ role: "user", content: [{ type: "input_audio", input_audio: {} }] }], stream: true })
    expect(bad.status).toBe(400)
    expect(bad.headers.get("content-type")).toContain("application/json")
    expect((await bad.json() as any).error).toMatchObject({ type: "invalid_request_error", param: "messages[0].content[0]" })
  })
})
