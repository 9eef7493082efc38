/** Admin fault injection on simulator placements, seen through the Chat Completions dialect. */
import OpenAI from "openai"
import { rmSync } from "node:fs"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { freshDataDir } from "../support/engines.ts"
import { fastConfigEnv } from "../support/fast-config.ts"
import { type GatewayProcess, startGateway } from "../support/gateway-process.ts"

describe("POST /admin/v1/placements/{id}/faults", () => {
  let gw: GatewayProcess
  let client: OpenAI
  const dir = freshDataDir()
  beforeAll(async () => {
    gw = await startGateway({ GATEWAY_DATA_DIR: dir, ...fastConfigEnv(dir) })
    client = new OpenAI({ apiKey: gw.apiKey!, baseURL: `${gw.baseUrl}/v1`, maxRetries: 0 })
  })
  afterAll(async () => {
    await gw?.stop()
    rmSync(dir, { recursive: true, force: true })
  })

  it("makes a placement fail before the first byte (non-2xx) and mid-stream (dialect error event)", async () => {
    const set = await gw.admin("POST", "/admin/v1/placements/pico-a/faults", { mode: "error", status: 503 })
    expect(set.status).toBe(200)
    expect(await set.json()).toMatchObject({ placementId: "pico-a", modelId: "svc-pico-1", faults: { mode: "error", status: 503 } })
    const failed = await client.chat.completions.create({ model: "svc-pico-1", messages: [{ role: "user", content: "hi" }] }).catch((e) => e)
    expect(failed).toBeInstanceOf(OpenAI.APIError)
    expect(failed.status).toBe(503)
    expect(failed.error.type).toBe("api_error")

    await gw.admin("POST", "/admin/v1/placements/pico-a/faults", { mode: "break-mid-stream" })
    const stream = await client.chat.completions.create({ model: "svc-pico-1", stream: true, messages: [{ role: "user", content: "tell me a story" }] })
    const received: Array<string> = []
    const error = await (async () => {
      for await (const chunk of stream) received.push(chunk.choices[0]?.delta?.content ?? "")
    })().catch((e) => e)
    expect(received.join("").length).toBeGreaterThan(0)
    expect(error).toBeInstanceOf(OpenAI.APIError)

    await gw.admin("POST", "/admin/v1/placements/pico-a/faults", { mode: "none" })
    const ok = await client.chat.completions.create({ model: "svc-pico-1", messages: [{ role: "user", content: "say exactly: healed" }] })
    expect(ok.choices[0].message.content).toBe("healed")
  })

  it("validates the body, the placement and the admin token", async () => {
    expect((await gw.admin("POST", "/admin/v1/placements/nope/faults", { mode: "error" })).status).toBe(404)
    const bad = await gw.admin("POST", "/admin/v1/placements/pico-a/faults", { mode: "explode" })
    expect(bad.status).toBe(400)
    expect(((await bad.json()) as { error: { message: string } }).error.message).toContain("mode")
    const anon = await fetch(`${gw.baseUrl}/admin/v1/placements/pico-a/faults`, { method: "POST", body: JSON.stringify({ mode: "none" }) })
    expect(anon.status).toBe(401)
  })
})
