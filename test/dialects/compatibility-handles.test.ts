/**
 * A compatibility handle promises the stock model's limits: an output ceiling above the serving
 * model's maximum is clamped to it (the answer then stops with the dialect's length reason if it
 * gets there), on every chat surface. A canonical id keeps the 400.
 */
import Anthropic from "@anthropic-ai/sdk"
import OpenAI from "openai"
import { rmSync } from "node:fs"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { embeddedDataDir } from "../support/engines.ts"
import { fastConfigEnv } from "../support/fast-config.ts"
import type { GatewayHandle } from "../support/gateway-process.ts"
import { startInProcessGateway } from "../support/in-process-gateway.ts"

const LONG = "say exactly: one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen"

describe("compatibility handles clamp the output ceiling", () => {
  const dir = embeddedDataDir()
  let gw: GatewayHandle
  let openai: OpenAI
  let anthropic: Anthropic
  beforeAll(async () => {
    // nova-mini (claude-haiku-4-5, gpt-4o-mini, gpt-4.1-mini) publishes a maximum of 8 tokens here,
    // so reaching the clamped ceiling is quick to see.
    gw = await startInProcessGateway({
      GATEWAY_DATA_DIR: dir,
      ...fastConfigEnv(dir, (config) => {
        config.models.find((m: any) => m.id === "svc-nova-mini").maxOutput = 8
      })
    })
    openai = new OpenAI({ apiKey: gw.apiKey!, baseURL: `${gw.baseUrl}/v1`, maxRetries: 0 })
    anthropic = new Anthropic({ apiKey: gw.apiKey!, baseURL: gw.baseUrl, maxRetries: 0 })
  })
  afterAll(async () => {
    await gw?.stop()
    rmSync(dir, { recursive: true, force: true })
  })

  // (The Anthropic SDK refuses a non-streaming call above ~21k max_tokens by itself.)
  it("Messages: max_tokens 16000 on claude-haiku-4-5 is served with the model's 8 and stops with max_tokens", async () => {
    const { data, response } = await anthropic.messages
      .create({ model: "claude-haiku-4-5", max_tokens: 16000, messages: [{ role: "user", content: LONG }] })
      .withResponse()
    expect(response.headers.get("xsvc-model")).toBe("svc-nova-mini")
    expect(data.stop_reason).toBe("max_tokens")
    expect(data.usage.output_tokens).toBe(8)
    expect((data.content[0] as { text: string }).text).toMatch(/^one two/)
    const canonical = await anthropic.messages.create({ model: "svc-nova-mini", max_tokens: 16000, messages: [{ role: "user", content: LONG }] }).catch((e) => e)
    expect(canonical.status).toBe(400)
    expect(canonical.error.error.message).toBe("The output ceiling 16000 is above the model's maximum of 8 tokens")
  })

  it("Messages stream: the same clamp, ending with message_delta stop_reason max_tokens", async () => {
    const message = await anthropic.messages.stream({ model: "claude-haiku-4-5", max_tokens: 64000, messages: [{ role: "user", content: LONG }] }).finalMessage()
    expect(message.stop_reason).toBe("max_tokens")
    expect(message.usage.output_tokens).toBe(8)
  })

  it("Chat Completions: max_completion_tokens 16384 on gpt-4o-mini finishes with length", async () => {
    const completion = await openai.chat.completions.create({ model: "gpt-4o-mini", max_completion_tokens: 16384, messages: [{ role: "user", content: LONG }] })
    expect(completion.choices[0].finish_reason).toBe("length")
    expect(completion.usage!.completion_tokens).toBe(8)
    const canonical = await openai.chat.completions.create({ model: "svc-nova-mini", max_tokens: 16384, messages: [{ role: "user", content: LONG }] }).catch((e) => e)
    expect(canonical.status).toBe(400)
  })

  it("Responses: max_output_tokens 32768 on gpt-4.1-mini ends incomplete (max_output_tokens)", async () => {
    const response = await openai.responses.create({ model: "gpt-4.1-mini", max_output_tokens: 32768, input: LONG, store: false })
    expect(response.status).toBe("incomplete")
    expect(response.incomplete_details).toEqual({ reason: "max_output_tokens" })
    expect(response.usage!.output_tokens).toBe(8)
    // The envelope echoes the ceiling as sent.
    expect(response.max_output_tokens).toBe(32768)
    const canonical = await openai.responses.create({ model: "svc-nova-mini", max_output_tokens: 32768, input: LONG }).catch((e) => e)
    expect(canonical.status).toBe(400)
    expect(canonical.param).toBe("max_output_tokens")
  })
})
