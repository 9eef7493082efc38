/**
 * The OpenAI Agents SDK (`@openai/agents`) on the gateway, over the Responses API (its default)
 * and over Chat Completions, with the gateway's address given only through the `openai` client it
 * is handed: an agent's text answer, a tool loop (the SDK calls the tool and sends its output back),
 * the same streamed, a typed final output (zod), a handoff to another agent, and, on Responses, a
 * second turn chained on the first with `previousResponseId` (a stored response). Each asserts what
 * came back. No global of the SDK is set (the default client, the API, tracing): the models and
 * the runner carry them, so other files of the worker see nothing of this one. On the run's
 * shared gateway.
 */
import { Agent, type Model, OpenAIChatCompletionsModel, OpenAIResponsesModel, Runner, tool } from "@openai/agents"
import OpenAI from "openai"
import { beforeAll, describe, expect, it } from "vitest"
import { z } from "zod"
import { sharedGateway } from "../support/shared-gateway.ts"

const weather = tool({
  name: "weather",
  description: "Current weather for a city",
  parameters: z.object({ city: z.string() }),
  execute: async ({ city }) => `snow in ${city}`
})

/** Traces would go to OpenAI's own endpoint: off, for this runner only. */
const runner = new Runner({ tracingDisabled: true })

const apis: ReadonlyArray<readonly [string, (client: OpenAI) => Model]> = [
  ["Responses", (client) => new OpenAIResponsesModel(client, "svc-orion-2")],
  ["Chat Completions", (client) => new OpenAIChatCompletionsModel(client, "svc-orion-2")]
]

describe.each(apis)("the OpenAI Agents SDK against the gateway (%s)", (_api, modelOn) => {
  let model: Model
  beforeAll(async () => {
    const gw = await sharedGateway({ name: "embedded" })
    model = modelOn(new OpenAI({ apiKey: gw.apiKey, baseURL: `${gw.baseUrl}/v1`, maxRetries: 0 }))
  })

  it("answers, runs a tool loop, and streams one", async () => {
    const agent = new Agent({ name: "assistant", instructions: "Be helpful.", model, tools: [weather] })
    expect((await runner.run(agent, "say exactly: hello there")).finalOutput).toBe("hello there")
    const looped = await runner.run(agent, "use weather for Paris")
    expect(looped.newItems.map((item) => item.type)).toEqual(["tool_call_item", "tool_call_output_item", "message_output_item"])
    const call = looped.newItems[0]!.rawItem as { name: string; arguments: string }
    expect(call.name).toBe("weather")
    const { city } = JSON.parse(call.arguments) as { city: string }
    expect(looped.finalOutput).toContain(`The weather tool returned: snow in ${city}`)
    const streamed = await runner.run(agent, "use weather for Rome", { stream: true })
    const kinds = new Set<string>()
    for await (const event of streamed) kinds.add(event.type)
    await streamed.completed
    expect([...kinds]).toEqual(expect.arrayContaining(["raw_model_stream_event", "run_item_stream_event"]))
    expect(streamed.finalOutput).toContain("The weather tool returned: snow in ")
  })

  it("gives a typed final output, and hands off to another agent", async () => {
    const Person = z.object({ name: z.string(), age: z.number().int() })
    const typed = new Agent({ name: "typed", instructions: "Describe a person.", model, outputType: Person })
    const person = (await runner.run(typed, "a person")).finalOutput
    expect(Person.parse(person)).toEqual(person)
    const specialist = new Agent({ name: "specialist", instructions: "Answer.", model })
    const triage = Agent.create({ name: "triage", instructions: "Hand off.", model, handoffs: [specialist] })
    const handed = await runner.run(triage, "use transfer_to_specialist")
    expect(handed.lastAgent?.name).toBe("specialist")
    expect(handed.newItems.map((item) => item.type)).toEqual(["handoff_call_item", "handoff_output_item", "message_output_item"])
  })
})

describe("the OpenAI Agents SDK against the gateway (Responses, chained)", () => {
  it("chains a second turn on the first with previousResponseId", async () => {
    const gw = await sharedGateway({ name: "embedded" })
    const client = new OpenAI({ apiKey: gw.apiKey, baseURL: `${gw.baseUrl}/v1`, maxRetries: 0 })
    const model = new OpenAIResponsesModel(client, "svc-orion-2")
    const agent = new Agent({ name: "assistant", instructions: "Be helpful.", model })
    const first = await runner.run(agent, "say exactly: one")
    expect(first.lastResponseId).toMatch(/^resp_/)
    const second = await runner.run(agent, "say exactly: two", { previousResponseId: first.lastResponseId! })
    expect(second.finalOutput).toBe("two")
    // The SDK sent the chain and the gateway kept it: the stored second turn names the first.
    expect((await client.responses.retrieve(second.lastResponseId!)).previous_response_id).toBe(first.lastResponseId)
  })
})
