/**
 * `/v1/messages` errors, authentication and count_tokens through the Anthropic SDK, and the raw
 * SSE text read with `fetch`, against the real gateway process on every storage engine.
 */
import Anthropic from "@anthropic-ai/sdk"
import { beforeAll, describe, expect, it } from "vitest"
import { engines } from "../../support/engines.ts"
import { type SharedGateway, sharedGateway } from "../../support/shared-gateway.ts"

const PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
const hi = [{ role: "user" as const, content: "say exactly: hi" }]

/** The error a call rejects with (fails the test if it resolves). */
const rejection = async (call: Promise<unknown>): Promise<InstanceType<typeof Anthropic.APIError>> => {
  const error = await call.then(() => undefined, (e: unknown) => e)
  expect(error).toBeInstanceOf(Anthropic.APIError)
  return error as InstanceType<typeof Anthropic.APIError>
}

/** The `{type: "error", error: {type}}` body of an SDK error. */
const bodyType = (error: InstanceType<typeof Anthropic.APIError>) => {
  const body = error.error as { type?: string; error?: { type?: string } }
  expect(body.type).toBe("error")
  return body.error?.type
}

describe.each(engines())("Messages errors, auth, count_tokens and raw SSE ($name)", (engine) => {
  let gw: SharedGateway
  let client: Anthropic
  const clientWith = (options: ConstructorParameters<typeof Anthropic>[0]) =>
    new Anthropic({ baseURL: gw.baseUrl, maxRetries: 0, ...options })
  beforeAll(async () => {
    gw = await sharedGateway(engine)
    client = clientWith({ apiKey: gw.apiKey! })
  })

  it("an image to a model without vision, or a PDF to one without documents, is a 400", async () => {
    const image = await rejection(client.messages.create({
      model: "svc-pico-1",
      max_tokens: 50,
      messages: [{ role: "user", content: [{ type: "image", source: { type: "base64", media_type: "image/png", data: PNG } }] }]
    }))
    expect(image).toBeInstanceOf(Anthropic.BadRequestError)
    expect(bodyType(image)).toBe("invalid_request_error")
    const pdf = await rejection(client.messages.create({
      model: "svc-lyra-3",
      max_tokens: 50,
      messages: [{ role: "user", content: [{ type: "document", source: { type: "base64", media_type: "application/pdf", data: "JVBERi0x" } }] }]
    }))
    expect(pdf).toBeInstanceOf(Anthropic.BadRequestError)
    expect(bodyType(pdf)).toBe("invalid_request_error")
  })

  it("a bad field is a 400 whose message names its path", async () => {
    const error = await rejection(client.messages.create({
      model: "svc-atlas-1",
      max_tokens: 50,
      messages: [{ role: "user", content: [{ type: "text", text: "a" }, { type: "image", source: { type: "base64", media_type: "image/png", data: "not base64!" } }] }]
    }))
    expect(error.status).toBe(400)
    expect((error.error as { error: { message: string } }).error.message).toMatch(/^messages\[0\]\.content\[1\]\.source\.data:/)
  })

  it("takes the key as x-api-key or as a Bearer token", async () => {
    const viaHeader = await client.messages.create({ model: "svc-pico-1", max_tokens: 20, messages: hi })
    expect(viaHeader.content).toEqual([{ type: "text", text: "hi" }])
    const viaBearer = await clientWith({ apiKey: null, authToken: gw.apiKey! }).messages.create({ model: "svc-pico-1", max_tokens: 20, messages: hi })
    expect(viaBearer.content).toEqual([{ type: "text", text: "hi" }])
  })

  it("a missing or wrong key is an AuthenticationError with type authentication_error", async () => {
    const missing = await rejection(
      clientWith({ apiKey: null, authToken: null, defaultHeaders: { authorization: null } }).messages.create({ model: "svc-pico-1", max_tokens: 20, messages: hi })
    )
    expect(missing).toBeInstanceOf(Anthropic.AuthenticationError)
    expect(bodyType(missing)).toBe("authentication_error")
    const wrong = await rejection(clientWith({ apiKey: "svc_not_a_key" }).messages.create({ model: "svc-pico-1", max_tokens: 20, messages: hi }))
    expect(wrong).toBeInstanceOf(Anthropic.AuthenticationError)
  })

  it("a key limited to the chat surface gets a PermissionDeniedError", async () => {
    const created = await (await gw.admin("POST", "/admin/v1/keys", { name: "chat-only", permissions: { surfaces: ["chat"] } })).json() as { key: string }
    const limited = clientWith({ apiKey: created.key })
    const error = await rejection(limited.messages.create({ model: "svc-pico-1", max_tokens: 20, messages: hi }))
    expect(error).toBeInstanceOf(Anthropic.PermissionDeniedError)
    expect(bodyType(error)).toBe("permission_error")
    expect(await rejection(limited.messages.countTokens({ model: "svc-pico-1", messages: hi }))).toBeInstanceOf(Anthropic.PermissionDeniedError)
  })

  it("an unknown model is a NotFoundError with type not_found, on create and count_tokens", async () => {
    const error = await rejection(client.messages.create({ model: "svc-nonexistent", max_tokens: 20, messages: hi }))
    expect(error).toBeInstanceOf(Anthropic.NotFoundError)
    expect(bodyType(error)).toBe("not_found")
    const counted = await rejection(client.messages.countTokens({ model: "svc-nonexistent", messages: hi }))
    expect(counted).toBeInstanceOf(Anthropic.NotFoundError)
    expect(bodyType(counted)).toBe("not_found")
  })

  it("count_tokens returns a positive integer that grows with system, messages and tools", async () => {
    const count = async (params: Parameters<typeof client.messages.countTokens>[0]) => (await client.messages.countTokens(params)).input_tokens
    const small = await count({ model: "claude-sonnet-4-5", messages: hi })
    expect(Number.isInteger(small)).toBe(true)
    expect(small).toBeGreaterThan(0)
    const longer = await count({ model: "svc-atlas-1", messages: [{ role: "user", content: "say exactly: hi ".repeat(50) }] })
    expect(longer).toBeGreaterThan(small + 100)
    const withSystem = await count({ model: "svc-atlas-1", system: "You answer in verse, always.", messages: hi })
    expect(withSystem).toBeGreaterThan(small)
    const withTools = await count({
      model: "svc-atlas-1",
      messages: hi,
      tools: [{ name: "lookup", description: "Looks things up", input_schema: { type: "object", properties: { q: { type: "string" } } } }]
    })
    expect(withTools).toBeGreaterThan(small)
  })

  it("raw SSE: named events with JSON data, in order, no pings, no empty data", async () => {
    const res = await fetch(`${gw.baseUrl}/v1/messages`, {
      method: "POST",
      headers: { "x-api-key": gw.apiKey!, "anthropic-version": "2023-06-01", "content-type": "application/json" },
      body: JSON.stringify({
        model: "svc-atlas-1",
        max_tokens: 4000,
        stream: true,
        thinking: { type: "enabled", budget_tokens: 1024 },
        messages: [{ role: "user", content: "say exactly: raw bytes on the wire" }]
      })
    })
    expect(res.status).toBe(200)
    expect(res.headers.get("content-type")).toContain("text/event-stream")
    expect(res.headers.get("cache-control")).toBe("no-cache")
    expect(res.headers.get("request-id")).toMatch(/^req_/)
    const text = await res.text()
    const frames = text.trimEnd().split("\n\n").map((frame) => frame.split("\n"))
    for (const lines of frames) {
      expect(lines).toHaveLength(2)
      expect(lines[0]).toMatch(/^event: \w+$/)
      expect(lines[1]).toMatch(/^data: \{.+\}$/)
      expect(JSON.parse(lines[1].slice(6)).type).toBe(lines[0].slice(7))
    }
    const names = frames.map((lines) => lines[0].slice(7))
    expect(names).not.toContain("ping")
    expect(names[0]).toBe("message_start")
    expect(names.slice(-2)).toEqual(["message_delta", "message_stop"])
    const starts = frames.filter((l) => l[0] === "event: content_block_start").map((l) => JSON.parse(l[1].slice(6)))
    expect(starts.map((s) => [s.index, s.content_block.type])).toEqual([[0, "thinking"], [1, "text"]])
    // Every block closes before the next opens.
    expect(names.join(" ")).toMatch(/^message_start (content_block_start (content_block_delta )*content_block_stop ){2}message_delta message_stop$/)
  })
})
