/**
 * The official SDKs' own helpers, which read more of an answer than a plain call does, pointed at
 * the gateway with only the base URL changed: structured outputs parsed and validated with zod
 * (`chat.completions.parse`, `responses.parse`, a parsed stream), the OpenAI tool runner (`runTools`:
 * it calls the tool and sends the result back itself), strict function tools' parsed arguments,
 * and Anthropic's `MessageStream` (`inputJson` events rebuild a tool's input) and `messages.parse`.
 * Each helper throws when what it parses does not fit the schema, so a wrong shape fails the test;
 * the values are checked besides. Two models, one whose native wire is Messages (Atlas) and one
 * whose wires are Responses and Chat Completions (Orion), so each helper is served both natively and
 * translated; on the run's shared gateway (what the helpers read does not depend on the storage engine).
 */
import Anthropic from "@anthropic-ai/sdk"
import { zodOutputFormat } from "@anthropic-ai/sdk/helpers/zod"
import OpenAI from "openai"
import { zodFunction, zodResponseFormat, zodTextFormat } from "openai/helpers/zod"
import { beforeAll, describe, expect, it } from "vitest"
import { z } from "zod"
import { type SharedGateway, sharedGateway } from "../support/shared-gateway.ts"

const Person = z.object({ name: z.string(), age: z.number().int(), tags: z.array(z.string()) })

/** A model a person could have written: a plain age (zod's `.int()` allows ±2^53 − 1). */
const expectPerson = (person: z.infer<typeof Person> | null | undefined) => {
  expect(Person.parse(person)).toEqual(person)
  expect(person!.age).toBeGreaterThanOrEqual(0)
  expect(person!.age).toBeLessThanOrEqual(100)
}

describe.each(["svc-atlas-1", "svc-orion-2"])("the SDKs' helpers against the gateway (%s)", (model) => {
  let gw: SharedGateway
  let openai: OpenAI
  let anthropic: Anthropic
  beforeAll(async () => {
    gw = await sharedGateway({ name: "embedded" })
    openai = new OpenAI({ apiKey: gw.apiKey, baseURL: `${gw.baseUrl}/v1`, maxRetries: 0 })
    anthropic = new Anthropic({ apiKey: gw.apiKey, baseURL: gw.baseUrl, maxRetries: 0 })
  })

  it("openai: chat.completions.parse, a parsed stream and responses.parse give zod-valid objects", async () => {
    const messages = [{ role: "user" as const, content: "a person" }]
    const parsed = await openai.chat.completions.parse({ model, messages, response_format: zodResponseFormat(Person, "person") })
    expect(parsed.choices[0]!.finish_reason).toBe("stop")
    expectPerson(parsed.choices[0]!.message.parsed)
    const stream = openai.chat.completions.stream({ model, messages, response_format: zodResponseFormat(Person, "person") })
    let deltas = 0
    stream.on("content.delta", () => deltas++)
    const final = await stream.finalChatCompletion()
    expect(deltas).toBeGreaterThan(0)
    expectPerson(final.choices[0]!.message.parsed)
    const response = await openai.responses.parse({ model, input: "a person", text: { format: zodTextFormat(Person, "person") } })
    expectPerson(response.output_parsed)
  })

  it("openai: runTools calls the tool and answers with its result; strict tools come back with parsed arguments", async () => {
    const called: Array<string> = []
    const runner = openai.chat.completions.runTools({
      model,
      messages: [{ role: "user", content: "use weather for Paris" }],
      tools: [zodFunction({ name: "weather", parameters: z.object({ city: z.string() }), function: ({ city }: { city: string }) => {
        called.push(city)
        return { city, forecast: "snow" }
      } })]
    })
    const content = await runner.finalContent()
    expect(called).toHaveLength(1)
    expect(content).toContain(`The weather tool returned: {"city":${JSON.stringify(called[0])},"forecast":"snow"}`)
    expect(await runner.allChatCompletions()).toHaveLength(2)
    const parsed = await openai.chat.completions.parse({
      model,
      messages: [{ role: "user", content: "the weather?" }],
      tools: [zodFunction({ name: "weather", parameters: z.object({ city: z.string(), days: z.number().int() }) })],
      tool_choice: "required"
    })
    const call = parsed.choices[0]!.message.tool_calls![0]!
    expect(call.type === "function" && call.function.name).toBe("weather")
    const args = call.type === "function" ? call.function.parsed_arguments as { city: string; days: number } : undefined
    expect(args).toEqual(JSON.parse(call.type === "function" ? call.function.arguments : "null"))
    expect(typeof args?.city).toBe("string")
  })

  it("anthropic: a MessageStream rebuilds the tool's input from inputJson events; messages.parse gives a zod-valid object", async () => {
    const stream = anthropic.messages.stream({
      model,
      max_tokens: 300,
      messages: [{ role: "user", content: "the weather?" }],
      tools: [{ name: "weather", input_schema: { type: "object", properties: { city: { type: "string" } }, required: ["city"] } }],
      tool_choice: { type: "any" }
    })
    const snapshots: Array<unknown> = []
    stream.on("inputJson", (_delta, snapshot) => snapshots.push(snapshot))
    const message = await stream.finalMessage()
    expect(message.stop_reason).toBe("tool_use")
    const block = message.content.find((b) => b.type === "tool_use")
    expect(block?.type === "tool_use" && block.name).toBe("weather")
    expect(snapshots.length).toBeGreaterThan(0)
    expect(snapshots.at(-1)).toEqual(block?.type === "tool_use" ? block.input : undefined)
    const parsed = await anthropic.messages.parse({
      model,
      max_tokens: 300,
      messages: [{ role: "user", content: "a person" }],
      output_config: { format: zodOutputFormat(Person) }
    })
    expectPerson(parsed.parsed_output)
  })
})
