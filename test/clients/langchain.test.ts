/**
 * LangChain's chat models (`@langchain/openai` over Chat Completions and over Responses,
 * `@langchain/anthropic` over Messages) pointed at the gateway with only the base URL changed, as
 * an application built on LangChain would be. They bring their own copies of the official SDKs
 * (older majors than the suites' own), and read the answers through LangChain's message types:
 * text, streamed chunks merged, usage, tool calls and a tool's result sent back, and
 * `withStructuredOutput` (a tool call, or a JSON schema) validated with zod. Every flow asserts
 * what came back, not only that nothing threw. On the run's shared gateway.
 */
import { ChatAnthropic } from "@langchain/anthropic"
import type { BaseChatModel } from "@langchain/core/language_models/chat_models"
import { type AIMessageChunk, HumanMessage, type UsageMetadata } from "@langchain/core/messages"
import { tool } from "@langchain/core/tools"
import { ChatOpenAI } from "@langchain/openai"
import { beforeAll, describe, expect, it } from "vitest"
import { z } from "zod"
import { sharedGateway } from "../support/shared-gateway.ts"

const Person = z.object({ name: z.string(), age: z.number().int() })

/** A weather tool whose result names the city it was called with, so the answer can be checked. */
const weather = tool(async ({ city }: { city: string }) => `snow in ${city}`, {
  name: "weather",
  description: "Current weather for a city",
  schema: z.object({ city: z.string() })
})

type Make = (baseUrl: string, apiKey: string) => BaseChatModel
const chatModels: ReadonlyArray<readonly [string, Make]> = [
  ["ChatOpenAI, Chat Completions", (baseUrl, apiKey) => new ChatOpenAI({ model: "svc-orion-2", apiKey, configuration: { baseURL: `${baseUrl}/v1` }, maxRetries: 0 })],
  ["ChatOpenAI, Responses", (baseUrl, apiKey) => new ChatOpenAI({ model: "svc-orion-2", apiKey, configuration: { baseURL: `${baseUrl}/v1` }, useResponsesApi: true, maxRetries: 0 })],
  ["ChatAnthropic, Messages", (baseUrl, apiKey) => new ChatAnthropic({ model: "svc-atlas-1", apiKey, anthropicApiUrl: baseUrl, maxRetries: 0 })]
]

describe.each(chatModels)("LangChain against the gateway (%s)", (_name, make) => {
  let model: BaseChatModel
  beforeAll(async () => {
    const gw = await sharedGateway({ name: "embedded" })
    model = make(gw.baseUrl, gw.apiKey)
  })

  it("answers, streams in chunks that merge into the answer, and reports usage", async () => {
    const answer = await model.invoke("say exactly: the harbor is calm")
    expect(answer.text).toBe("the harbor is calm")
    // (Typed loosely by LangChain's generic message structure: read as what it holds.)
    const usage = answer.usage_metadata as UsageMetadata | undefined
    expect(usage?.input_tokens).toBeGreaterThan(0)
    expect(usage?.output_tokens).toBeGreaterThan(0)
    let merged: AIMessageChunk | undefined
    let chunks = 0
    for await (const chunk of await model.stream("say exactly: the bridge is long and the river is wide")) {
      chunks++
      merged = merged === undefined ? chunk : merged.concat(chunk)
    }
    expect(chunks).toBeGreaterThan(2)
    expect(merged?.text).toBe("the bridge is long and the river is wide")
  })

  it("calls a bound tool, and answers from the tool's result", async () => {
    const withTools = model.bindTools!([weather])
    const question = new HumanMessage("use weather for Paris")
    const asked = await withTools.invoke([question])
    expect(asked.tool_calls).toHaveLength(1)
    const call = asked.tool_calls![0]!
    expect(call.name).toBe("weather")
    expect(typeof call.args.city).toBe("string")
    const result = await weather.invoke(call)
    const answer = await withTools.invoke([question, asked, result])
    expect(answer.text).toContain(`The weather tool returned: snow in ${call.args.city}`)
  })

  it("gives zod-valid structured output, as a tool call and as a JSON schema", async () => {
    for (const method of ["functionCalling", "jsonSchema"] as const) {
      const person = await model.withStructuredOutput(Person, { method }).invoke("a person")
      expect(Person.parse(person)).toEqual(person)
      expect(person.age).toBeGreaterThanOrEqual(0)
      expect(person.age).toBeLessThanOrEqual(100)
    }
  })
})
