/**
 * Continuity over HTTP, driven by admin fault injection on simulator placements: failover before
 * the first byte is invisible but for `xsvc-model`; a break in plain text continues elsewhere
 * (marked by an SSE comment); a break in a tool call, or with no candidate left, ends with the
 * dialect's error event; repeated failures open a placement's circuit.
 */
import Anthropic from "@anthropic-ai/sdk"
import OpenAI from "openai"
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest"
import { gatewayWith, placeModel, post, queueOf, readChunks, type TestGateway, untilCircuitsNotOpen } from "./support.ts"

describe("continuity failover", () => {
  let gw: TestGateway
  let openai: OpenAI
  let anthropic: Anthropic
  const fault = async (placementId: string, body: Record<string, unknown>) => {
    const res = await gw.admin("POST", `/admin/v1/placements/${placementId}/faults`, body)
    expect(res.status).toBe(200)
    return res.json()
  }
  beforeAll(async () => {
    gw = await gatewayWith((config) => {
      placeModel(config, "svc-lyra-3", [{ id: "lyra-a", capacity: 4 }]) // no equivalents: nowhere to go
    }, { GATEWAY_RETRY_BASE_MS: "10", GATEWAY_CIRCUIT_COOLDOWN_MS: "100" })
    openai = new OpenAI({ apiKey: gw.apiKey!, baseURL: `${gw.baseUrl}/v1`, maxRetries: 0 })
    anthropic = new Anthropic({ apiKey: gw.apiKey!, baseURL: gw.baseUrl, maxRetries: 0 })
  })
  const placements = ["atlas-a", "atlas-b", "pico-a", "lyra-a", "nova-a", "nova-b"]
  afterEach(async () => {
    for (const id of placements) await fault(id, { mode: "none" })
    await untilCircuitsNotOpen(gw, placements) // open circuits reach their half-open probe
  })
  afterAll(async () => {
    await gw?.close()
  })

  it("validates the fault body, the placement and the admin token", async () => {
    expect((await gw.admin("POST", "/admin/v1/placements/nope/faults", { mode: "error" })).status).toBe(404)
    const bad = await gw.admin("POST", "/admin/v1/placements/pico-a/faults", { mode: "explode" })
    expect(bad.status).toBe(400)
    expect(((await bad.json()) as { error: { message: string } }).error.message).toContain("mode")
    const anon = await fetch(`${gw.baseUrl}/admin/v1/placements/pico-a/faults`, { method: "POST", body: JSON.stringify({ mode: "none" }) })
    expect(anon.status).toBe(401)
  })

  it("fails over to the model's other placement before the first byte: only xsvc-model could tell", async () => {
    expect(await fault("atlas-a", { mode: "error", status: 503 })).toMatchObject({ placementId: "atlas-a", faults: { mode: "error", status: 503 } })
    for (let i = 0; i < 3; i++) {
      const { data, response } = await openai.chat.completions.create({
        model: "svc-atlas-1", messages: [{ role: "user", content: "say exactly: still here" }]
      }).withResponse()
      expect(data.choices[0].message.content).toBe("still here")
      expect(response.headers.get("xsvc-model")).toBe("svc-atlas-1")
    }
  })

  it("moves to an equivalent model when the named one cannot answer, and says so in xsvc-model", async () => {
    await fault("pico-a", { mode: "error", status: 500 })
    const { data, response } = await anthropic.messages.create({
      model: "svc-pico-1", max_tokens: 100, messages: [{ role: "user", content: "say exactly: covered" }]
    }).withResponse()
    expect(response.headers.get("xsvc-model")).toBe("svc-nova-mini")
    expect(data.model).toBe("svc-nova-mini")
    expect(data.content).toMatchObject([{ type: "text", text: "covered" }])
  })

  it("answers 5xx api_error when no candidate is left (after retrying)", async () => {
    await fault("lyra-a", { mode: "error", status: 500 })
    const error = await openai.chat.completions.create({ model: "svc-lyra-3", messages: [{ role: "user", content: "hi" }] }).catch((e) => e)
    expect(error).toBeInstanceOf(OpenAI.APIError)
    expect(error.status).toBe(502)
    expect(error.error.type).toBe("api_error")
    await untilCircuitsNotOpen(gw, ["lyra-a"]) // the open circuit reaches its half-open probe
    const streamed = await post(gw, "/v1/messages", gw.apiKey!, { model: "svc-lyra-3", max_tokens: 50, stream: true, messages: [{ role: "user", content: "hi" }] })
    expect(streamed.status).toBe(502) // nothing was sent yet: a proper status, not a 200 with an error event
    expect(((await streamed.json()) as { type: string; error: { type: string } })).toMatchObject({ type: "error", error: { type: "api_error" } })
  })

  it("continues a stream broken in plain text on another placement, marked by an SSE comment", async () => {
    await fault("pico-a", { mode: "break-mid-stream" })
    const raw = await post(gw, "/v1/chat/completions", gw.apiKey!, {
      model: "svc-pico-1", stream: true, messages: [{ role: "user", content: "tell me a story" }]
    })
    expect(raw.status).toBe(200)
    expect(raw.headers.get("xsvc-model")).toBe("svc-pico-1")
    const text = (await readChunks(raw)).join("")
    expect(text).toMatch(/^: continuing on svc-nova-mini from the text already sent$/m)
    expect(text.trimEnd().endsWith("data: [DONE]")).toBe(true)
    expect(text).not.toContain('"error"')

    // The SDK sees one uninterrupted answer.
    const stream = anthropic.messages.stream({ model: "svc-pico-1", max_tokens: 300, messages: [{ role: "user", content: "tell me a story" }] })
    const final = await stream.finalMessage()
    expect(final.stop_reason).toBe("end_turn")
    expect(final.content).toHaveLength(1)
    expect(final.content[0].type).toBe("text")
  })

  it("ends a stream broken inside a tool call with the dialect's error event", async () => {
    await fault("pico-a", { mode: "break-mid-stream" })
    const tools = [{ type: "function" as const, function: { name: "lookup", parameters: { type: "object", properties: { q: { type: "string" } }, required: ["q"] } } }]
    const raw = await post(gw, "/v1/chat/completions", gw.apiKey!, {
      model: "svc-pico-1", stream: true, tools, tool_choice: { type: "function", function: { name: "lookup" } },
      messages: [{ role: "user", content: "look it up" }]
    })
    expect(raw.status).toBe(200)
    const text = (await readChunks(raw)).join("")
    expect(text).toContain('"tool_calls"')
    expect(text).toContain('data: {"error":')
    expect(text).not.toContain("[DONE]")
    await untilCircuitsNotOpen(gw, ["pico-a"]) // the probe that failed re-opened the circuit: wait for the next
    const stream = await openai.chat.completions.create({
      model: "svc-pico-1", stream: true, tools, tool_choice: { type: "function", function: { name: "lookup" } },
      messages: [{ role: "user", content: "look it up" }]
    })
    const error = await (async () => {
      for await (const _ of stream) { /* drain */ }
    })().catch((e) => e)
    expect(error).toBeInstanceOf(OpenAI.APIError)
  })

  it("ends a broken text stream with the error event when no candidate can continue it", async () => {
    await fault("lyra-a", { mode: "break-mid-stream" })
    const raw = await post(gw, "/v1/messages", gw.apiKey!, { model: "svc-lyra-3", max_tokens: 300, stream: true, messages: [{ role: "user", content: "tell me a story" }] })
    expect(raw.status).toBe(200)
    const text = (await readChunks(raw)).join("")
    expect(text).toContain("event: content_block_delta")
    expect(text).toMatch(/event: error\ndata: \{"type":"error","error":\{"type":"api_error"/)
    expect(text).not.toContain("event: message_stop")
  })

  it("opens a placement's circuit after repeated failures; dispatch then skips it", async () => {
    await fault("atlas-b", { mode: "error", status: 500 })
    for (let i = 0; i < 4; i++) {
      const { response } = await openai.chat.completions.create({ model: "svc-atlas-1", messages: [{ role: "user", content: "hi" }] }).withResponse()
      expect(response.headers.get("xsvc-model")).toBe("svc-atlas-1")
    }
    // atlas-a is preferred, so force traffic onto atlas-b by failing atlas-a as well, briefly.
    await fault("atlas-a", { mode: "error", status: 500 })
    for (let i = 0; i < 3; i++) {
      const { response } = await openai.chat.completions.create({ model: "svc-atlas-1", messages: [{ role: "user", content: "hi" }] }).withResponse()
      expect(response.headers.get("xsvc-model")).toBe("svc-orion-2") // atlas's equivalent
    }
    // Tripped: open, or already half-open once the (short, 100 ms) cooldown passed.
    expect(["open", "halfOpen"]).toContain((await queueOf(gw, "atlas-b")).circuit)
    expect(["open", "halfOpen"]).toContain((await queueOf(gw, "atlas-a")).circuit)
  })
})
