/**
 * The gateway with placements that point at the standalone simulator's server (what `gateway
 * simulate` runs, here in the test's process: only its answers matter, not its process) through
 * the real Anthropic and OpenAI-compatible adapters over real HTTP: the SDK flows that pass on the
 * in-process simulator backend pass here too, and the upstream's model name never reaches the client.
 */
import Anthropic from "@anthropic-ai/sdk"
import OpenAI from "openai"
import { rmSync } from "node:fs"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { engines, freshDataDir } from "../support/engines.ts"
import { fastConfigEnv } from "../support/fast-config.ts"
import type { GatewayHandle } from "../support/gateway-process.ts"
import { startInProcessGateway } from "../support/in-process-gateway.ts"
import { type SimulateUpstream, startInProcessSimulateUpstream } from "../support/simulate-process.ts"

const UPSTREAM_KEY = "upstream-secret"
const HIDDEN = "hidden-upstream-model"
const weather = {
  name: "get_weather",
  description: "Weather for a city",
  input_schema: { type: "object" as const, properties: { city: { type: "string" } }, required: ["city"] }
}

describe.each(engines())("upstream placements through gateway simulate ($name)", (engine) => {
  let upstream: SimulateUpstream
  let gw: GatewayHandle
  let cleanup: () => Promise<void>
  const dir = freshDataDir()
  beforeAll(async () => {
    upstream = await startInProcessSimulateUpstream(UPSTREAM_KEY)
    const setup = await engine.setup()
    cleanup = setup.cleanup
    const env = fastConfigEnv(dir, (config) => {
      const point = (id: string, backend: string, baseUrl: string) => {
        const model = config.models.find((m: { id: string }) => m.id === id)
        model.placements = [{ id: `${id}-up`, backend, capacity: 8, baseUrl, apiKeyEnv: "UPSTREAM_KEY", upstreamModel: HIDDEN }]
        model.equivalents = [] // failures must reach the client here, not fail over to a simulator
      }
      point("svc-atlas-1", "anthropic", upstream.baseUrl)
      point("svc-nova-mini", "openai-compatible", `${upstream.baseUrl}/v1`)
    })
    gw = await startInProcessGateway({ ...setup.env, ...env, UPSTREAM_KEY, GATEWAY_RETRY_BASE_MS: "10", GATEWAY_CIRCUIT_COOLDOWN_MS: "50" })
  })
  afterAll(async () => {
    await gw?.stop()
    await upstream?.stop()
    await cleanup?.()
    rmSync(dir, { recursive: true, force: true })
  })

  for (const model of ["svc-atlas-1", "svc-nova-mini"]) {
    it(`Messages SDK: create, stream helper and a tool round trip on ${model}`, async () => {
      const client = new Anthropic({ apiKey: gw.apiKey!, baseURL: gw.baseUrl, maxRetries: 0 })
      const { data: message, response } = await client.messages.create({
        model, max_tokens: 200, messages: [{ role: "user", content: "say exactly: upstream hello" }]
      }).withResponse()
      expect(response.headers.get("xsvc-model")).toBe(model)
      expect(message.content).toHaveLength(1)
      expect(message.content[0]).toMatchObject({ type: "text", text: "upstream hello" })
      expect(message.model).toBe(model)
      const final = await client.messages.stream({ model, max_tokens: 200, messages: [{ role: "user", content: "tell me a story" }] }).finalMessage()
      expect(final.stop_reason).toBe("end_turn")
      expect(final.usage.output_tokens).toBeGreaterThan(0)
      const call = await client.messages.create({
        model, max_tokens: 300, tools: [weather], messages: [{ role: "user", content: "use get_weather please" }]
      })
      const toolUse = call.content.find((b) => b.type === "tool_use")!
      expect(call.stop_reason).toBe("tool_use")
      expect(toolUse).toMatchObject({ type: "tool_use", name: "get_weather" })
      const answer = await client.messages.create({
        model, max_tokens: 300, tools: [weather],
        messages: [
          { role: "user", content: "use get_weather please" },
          { role: "assistant", content: call.content },
          { role: "user", content: [{ type: "tool_result", tool_use_id: toolUse.type === "tool_use" ? toolUse.id : "", content: "sunny and 21C" }] }
        ]
      })
      expect(JSON.stringify(answer.content)).toContain("sunny and 21C")
      expect(JSON.stringify([message, final, call, answer])).not.toContain(HIDDEN)
    })

    it(`OpenAI SDK: chat stream helper, tools and responses on ${model}`, async () => {
      const client = new OpenAI({ apiKey: gw.apiKey!, baseURL: `${gw.baseUrl}/v1`, maxRetries: 0 })
      const completion = await client.chat.completions.stream({
        model, messages: [{ role: "user", content: "say exactly: via upstream" }], stream_options: { include_usage: true }
      }).finalChatCompletion()
      expect(completion.choices[0].message.content).toBe("via upstream")
      expect(completion.model).toBe(model)
      const tools = await client.chat.completions.create({
        model,
        messages: [{ role: "user", content: "call get_weather" }],
        tools: [{ type: "function", function: { name: "get_weather", parameters: weather.input_schema } }],
        tool_choice: "required"
      })
      const toolCall = tools.choices[0].message.tool_calls![0]
      expect(tools.choices[0].finish_reason).toBe("tool_calls")
      expect(toolCall.type === "function" && JSON.parse(toolCall.function.arguments)).toHaveProperty("city")
      const response = await client.responses.create({ model, input: "say exactly: responses upstream" })
      expect(response.output_text).toBe("responses upstream")
      expect(JSON.stringify([completion, tools, response])).not.toContain(HIDDEN)
    })
  }

  it("maps an upstream failure to an error the client understands", async () => {
    await upstream.setFaults({ mode: "error", status: 500 })
    try {
      const client = new OpenAI({ apiKey: gw.apiKey!, baseURL: `${gw.baseUrl}/v1`, maxRetries: 0 })
      const error = await client.chat.completions.create({ model: "svc-nova-mini", messages: [{ role: "user", content: "hi" }] }).catch((e) => e)
      expect(error).toBeInstanceOf(OpenAI.APIError)
      expect(error.status).toBeGreaterThanOrEqual(500)
      expect(error.error.type).toBe("api_error")
      expect(JSON.stringify(error.error)).not.toContain(HIDDEN)
    } finally {
      await upstream.setFaults({ mode: "none" })
    }
  })
})
