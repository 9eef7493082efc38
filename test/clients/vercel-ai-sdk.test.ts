/**
 * The Vercel AI SDK (`ai` with `@ai-sdk/openai` and `@ai-sdk/anthropic`) pointed at the gateway
 * with only the base URL changed and the providers' defaults otherwise: the Responses model
 * (`openai(...)`, `store: true` by default, so earlier turns come back as `item_reference`s), the
 * Chat Completions model (`openai.chat(...)`) and the Anthropic model (which sends the stock
 * model's own `max_tokens` when the caller sets none). Every flow asserts what came back — text,
 * tool arguments, objects, vectors — not only that nothing threw.
 */
import { createAnthropic } from "@ai-sdk/anthropic"
import { createOpenAI } from "@ai-sdk/openai"
import { embed, embedMany, generateObject, generateText, type LanguageModel, type ModelMessage, stepCountIs, streamText, tool } from "ai"
import { beforeAll, describe, expect, it } from "vitest"
import { z } from "zod"
import { engines } from "../support/engines.ts"
import { type SharedGateway, sharedGateway } from "../support/shared-gateway.ts"

/** A weather tool whose result names the city it was called with, so the answer can be checked. */
const weatherTool = () => {
  const calls: Array<{ city: string }> = []
  const getWeather = tool({
    description: "Current weather for a city",
    inputSchema: z.object({ city: z.string() }),
    execute: async ({ city }) => {
      calls.push({ city })
      return { city, forecast: "snow" }
    }
  })
  return { calls, tools: { get_weather: getWeather } }
}

const Recipe = z.object({ name: z.string(), servings: z.number().int(), steps: z.array(z.string()) })

describe.each(engines())("the Vercel AI SDK against the gateway ($name)", (engine) => {
  let gw: SharedGateway
  let openai: ReturnType<typeof createOpenAI>
  let anthropic: ReturnType<typeof createAnthropic>
  beforeAll(async () => {
    gw = await sharedGateway(engine)
    openai = createOpenAI({ apiKey: gw.apiKey!, baseURL: `${gw.baseUrl}/v1` })
    anthropic = createAnthropic({ apiKey: gw.apiKey!, baseURL: `${gw.baseUrl}/v1` })
  })

  const providers = (): ReadonlyArray<[string, LanguageModel]> => [
    ["openai(gpt-4.1) — Responses, store on", openai("gpt-4.1")],
    ["openai.chat(gpt-4.1) — Chat Completions", openai.chat("gpt-4.1")],
    ["anthropic(claude-sonnet-4-5) — Messages, default max_tokens", anthropic("claude-sonnet-4-5")]
  ]

  describe.each([0, 1, 2])("provider %#", (which) => {
    const model = () => providers()[which][1]

    it("generateText returns the model's text", async () => {
      const result = await generateText({ model: model(), prompt: "say exactly: hello from the gateway", maxRetries: 0 })
      expect(result.text).toBe("hello from the gateway")
      expect(result.finishReason).toBe("stop")
      expect(result.usage.outputTokens).toBeGreaterThan(0)
    })

    it("streamText streams the model's text", async () => {
      const result = streamText({ model: model(), prompt: "say exactly: streamed through the gateway", maxRetries: 0 })
      const parts: Array<string> = []
      for await (const part of result.textStream) parts.push(part)
      expect(parts.join("")).toBe("streamed through the gateway")
      expect(await result.finishReason).toBe("stop")
    })

    it("a tool round trip (stopWhen: stepCountIs(3)) calls the tool and answers from its result", async () => {
      const { calls, tools } = weatherTool()
      const result = await generateText({
        model: model(),
        tools,
        stopWhen: stepCountIs(3),
        prompt: "What is the weather in Oslo? Use get_weather.",
        maxRetries: 0
      })
      expect(calls).toHaveLength(1)
      const call = result.steps[0].toolCalls[0]
      expect(call.toolName).toBe("get_weather")
      expect(call.input).toEqual({ city: calls[0].city })
      expect(typeof calls[0].city).toBe("string")
      expect(result.steps).toHaveLength(2)
      expect(result.text).toContain(`The get_weather tool returned: {"city":${JSON.stringify(calls[0].city)},"forecast":"snow"}`)
    })

    it("a streamed tool round trip (stopWhen: stepCountIs(3)) does the same", async () => {
      const { calls, tools } = weatherTool()
      const result = streamText({
        model: model(),
        tools,
        stopWhen: stepCountIs(3),
        prompt: "What is the weather in Oslo? Use get_weather.",
        maxRetries: 0
      })
      let text = ""
      for await (const part of result.textStream) text += part
      expect(calls).toHaveLength(1)
      const steps = await result.steps
      expect(steps).toHaveLength(2)
      expect(steps[0].toolCalls[0]).toMatchObject({ toolName: "get_weather", input: { city: calls[0].city } })
      expect(text).toContain(`The get_weather tool returned: {"city":${JSON.stringify(calls[0].city)},"forecast":"snow"}`)
    })

    it("generateObject returns an object matching the zod schema", async () => {
      const result = await generateObject({ model: model(), schema: Recipe, prompt: "A pancake recipe.", maxRetries: 0 })
      expect(Recipe.safeParse(result.object).success).toBe(true)
      expect(typeof result.object.name).toBe("string")
      expect(Array.isArray(result.object.steps)).toBe(true)
    })

    it("a multi-turn chat feeds back response.messages and the model sees the earlier turns", async () => {
      const messages: Array<ModelMessage> = [{ role: "user", content: "say exactly: first answer" }]
      const first = await generateText({ model: model(), messages, maxRetries: 0 })
      expect(first.text).toBe("first answer")
      messages.push(...first.response.messages, { role: "user", content: "say exactly: second answer" })
      const second = await generateText({ model: model(), messages, maxRetries: 0 })
      expect(second.text).toBe("second answer")
      // The second prompt holds the whole first turn: more input than the same last turn alone.
      const alone = await generateText({ model: model(), prompt: "say exactly: second answer", maxRetries: 0 })
      expect(second.usage.inputTokens).toBeGreaterThan(alone.usage.inputTokens!)
    })
  })

  it("an o4-mini tool loop with reasoningSummary: auto sends its reasoning back by reference and finishes", async () => {
    const { calls, tools } = weatherTool()
    const result = await generateText({
      model: openai("o4-mini"),
      tools,
      stopWhen: stepCountIs(3),
      prompt: "What is the weather in Oslo? Use get_weather.",
      providerOptions: { openai: { reasoningSummary: "auto" } },
      maxRetries: 0
    })
    expect(calls).toHaveLength(1)
    expect(result.steps).toHaveLength(2)
    expect(result.steps[0].reasoningText?.length).toBeGreaterThan(0)
    expect(result.text).toContain(`The get_weather tool returned: {"city":${JSON.stringify(calls[0].city)},"forecast":"snow"}`)
  })

  it("embed and embedMany return vectors of the model's dimension, similar texts closer", async () => {
    const model = openai.embedding("text-embedding-3-small")
    const one = await embed({ model, value: "the cat sat on the mat", maxRetries: 0 })
    expect(one.embedding).toHaveLength(1536)
    const many = await embedMany({ model, values: ["the cat sat on the mat", "a cat sat on a mat", "quarterly revenue grew"], maxRetries: 0 })
    expect(many.embeddings).toHaveLength(3)
    const cosine = (a: ReadonlyArray<number>, b: ReadonlyArray<number>) => a.reduce((sum, x, i) => sum + x * b[i], 0)
    expect(many.embeddings[0]).toEqual(one.embedding)
    expect(cosine(many.embeddings[0], many.embeddings[1])).toBeGreaterThan(cosine(many.embeddings[0], many.embeddings[2]))
  })
})
