/**
 * Chat Completions through the official `openai` SDK against the real gateway process, on every
 * storage engine: bodies, streams, the stream helper, tool calls, usage, ceilings, stops, strict
 * JSON schemas, compatibility handles and every chat model of the catalog.
 */
import OpenAI from "openai"
import { beforeAll, describe, expect, it } from "vitest"
import { engines } from "../../support/engines.ts"
import { fastConfig } from "../../support/fast-config.ts"
import { type SharedGateway, sharedGateway } from "../../support/shared-gateway.ts"
import { validateJsonSchema } from "../../simulator/validate-json-schema.ts"

const weatherTool: OpenAI.Chat.ChatCompletionTool = {
  type: "function",
  function: {
    name: "get_weather",
    description: "Weather for a city",
    parameters: { type: "object", properties: { city: { type: "string" }, days: { type: "integer", minimum: 1, maximum: 5 } }, required: ["city", "days"] }
  }
}
const timeTool: OpenAI.Chat.ChatCompletionTool = {
  type: "function",
  function: { name: "get_time", parameters: { type: "object", properties: { zone: { type: "string" } }, required: ["zone"] } }
}
const say = (text: string): Array<OpenAI.Chat.ChatCompletionMessageParam> => [{ role: "user", content: `say exactly: ${text}` }]

describe.each(engines())("chat completions with the openai SDK ($name)", (engine) => {
  let gw: SharedGateway
  let client: OpenAI
  beforeAll(async () => {
    gw = await sharedGateway(engine)
    client = new OpenAI({ apiKey: gw.apiKey, baseURL: `${gw.baseUrl}/v1`, maxRetries: 0 })
  })

  it("answers a body with content, finish_reason and usage", async () => {
    const completion = await client.chat.completions.create({ model: "svc-nova-mini", messages: say("Hello there, friend.") })
    expect(completion.id).toMatch(/^chatcmpl-/)
    expect(completion.object).toBe("chat.completion")
    expect(completion.model).toBe("svc-nova-mini")
    expect(completion.choices[0].message).toMatchObject({ role: "assistant", content: "Hello there, friend.", refusal: null })
    expect(completion.choices[0].finish_reason).toBe("stop")
    const usage = completion.usage!
    expect(usage.prompt_tokens).toBeGreaterThan(0)
    expect(usage.completion_tokens).toBeGreaterThan(0)
    expect(usage.total_tokens).toBe(usage.prompt_tokens + usage.completion_tokens)
  })

  it("streams chunks that concatenate to the same text", async () => {
    const stream = await client.chat.completions.create({ model: "svc-nova-mini", messages: say("one two three four five six seven"), stream: true })
    let text = ""
    const finishes: Array<string | null> = []
    const ids = new Set<string>()
    for await (const chunk of stream) {
      ids.add(chunk.id)
      text += chunk.choices[0]?.delta.content ?? ""
      finishes.push(chunk.choices[0]?.finish_reason ?? null)
    }
    expect(text).toBe("one two three four five six seven")
    expect(ids.size).toBe(1)
    expect(finishes.at(-1)).toBe("stop")
  })

  it("works with chat.completions.stream() and finalChatCompletion()", async () => {
    const deltas: Array<string> = []
    const runner = client.chat.completions.stream({ model: "svc-lyra-3", messages: say("streamed through the helper") })
    runner.on("content.delta", ({ delta }) => deltas.push(delta))
    const final = await runner.finalChatCompletion()
    expect(final.choices[0].message.content).toBe("streamed through the helper")
    expect(deltas.join("")).toBe("streamed through the helper")
    expect(final.choices[0].finish_reason).toBe("stop")
  })

  it("streams parallel tool calls that the SDK assembles", async () => {
    const runner = client.chat.completions.stream({
      model: "svc-nova-mini",
      messages: [{ role: "user", content: "Use get_weather and get_time for Paris." }],
      tools: [weatherTool, timeTool]
    })
    const done: Array<string> = []
    runner.on("tool_calls.function.arguments.done", ({ name }) => done.push(name))
    const final = await runner.finalChatCompletion()
    const message = final.choices[0].message
    expect(final.choices[0].finish_reason).toBe("tool_calls")
    expect(message.tool_calls?.map((call) => call.type === "function" && call.function.name)).toEqual(["get_weather", "get_time"])
    expect(done).toEqual(["get_weather", "get_time"])
    const weather = message.tool_calls![0]
    if (weather.type !== "function") throw new Error("expected a function call")
    expect(validateJsonSchema(JSON.parse(weather.function.arguments), weatherTool.function.parameters as any)).toEqual([])
  })

  it("completes a tool round trip: the answer refers to the tool's result", async () => {
    const messages: Array<OpenAI.Chat.ChatCompletionMessageParam> = [{ role: "user", content: "What is the weather in Oslo?" }]
    const first = await client.chat.completions.create({
      model: "svc-atlas-1",
      messages,
      tools: [weatherTool],
      tool_choice: { type: "function", function: { name: "get_weather" } }
    })
    const call = first.choices[0].message.tool_calls![0]
    expect(first.choices[0].message.content).toBeNull()
    expect(first.choices[0].finish_reason).toBe("tool_calls")
    messages.push(first.choices[0].message, { role: "tool", tool_call_id: call.id, content: "Snow, -3 degrees" })
    const second = await client.chat.completions.create({ model: "svc-atlas-1", messages, tools: [weatherTool] })
    expect(second.choices[0].message.content).toContain("The get_weather tool returned: Snow, -3 degrees.")
    expect(second.choices[0].finish_reason).toBe("stop")
  })

  it("sends a usage chunk with include_usage, matching the body's usage", async () => {
    const request = { model: "svc-nova-mini", messages: say("count my tokens please") }
    const body = await client.chat.completions.create(request)
    const stream = await client.chat.completions.create({ ...request, stream: true, stream_options: { include_usage: true } })
    const chunks: Array<OpenAI.Chat.ChatCompletionChunk> = []
    for await (const chunk of stream) chunks.push(chunk)
    const last = chunks.at(-1)!
    expect(last.choices).toEqual([])
    expect(last.usage).toMatchObject({ prompt_tokens: body.usage!.prompt_tokens, completion_tokens: body.usage!.completion_tokens })
    expect(chunks.slice(0, -1).every((chunk) => chunk.usage === null)).toBe(true)
  })

  it("stops at max_tokens with finish_reason length", async () => {
    const completion = await client.chat.completions.create({ model: "svc-pico-1", messages: [{ role: "user", content: "Tell me a long story." }], max_tokens: 5 })
    expect(completion.choices[0].finish_reason).toBe("length")
    expect(completion.usage!.completion_tokens).toBe(5)
    const capped = await client.chat.completions.create({ model: "svc-pico-1", messages: [{ role: "user", content: "Another story." }], max_completion_tokens: 3, max_tokens: 50 })
    expect(capped.usage!.completion_tokens).toBe(3)
  })

  it("honors stop sequences", async () => {
    const completion = await client.chat.completions.create({ model: "svc-nova-mini", messages: say("alpha beta STOP gamma"), stop: ["STOP"] })
    expect(completion.choices[0].message.content).toBe("alpha beta ")
    expect(completion.choices[0].finish_reason).toBe("stop")
  })

  it("returns content that validates against a strict json_schema", async () => {
    const schema = {
      type: "object",
      properties: { name: { type: "string" }, age: { type: "integer", minimum: 0, maximum: 120 }, tags: { type: "array", items: { type: "string" } } },
      required: ["name", "age", "tags"],
      additionalProperties: false
    }
    const completion = await client.chat.completions.create({
      model: "svc-lyra-3",
      messages: [{ role: "user", content: "Describe a person." }],
      response_format: { type: "json_schema", json_schema: { name: "person", schema, strict: true } }
    })
    const value = JSON.parse(completion.choices[0].message.content!)
    expect(validateJsonSchema(value, schema)).toEqual([])
  })

  it("resolves a compatibility handle, says what served it in xsvc-model, and sends x-request-id", async () => {
    const { data, response } = await client.chat.completions.create({ model: "gpt-4o-mini", messages: say("handled") }).withResponse()
    expect(data.choices[0].message.content).toBe("handled")
    expect(data.model).toBe("svc-nova-mini")
    expect(response.headers.get("xsvc-model")).toBe("svc-nova-mini")
    expect(response.headers.get("x-request-id")).toMatch(/^req_/)
    expect(response.headers.get("content-type")).toContain("application/json")
  })

  it("answers with every chat model of the catalog, streaming and not", async () => {
    for (const model of fastConfig().models) {
      const body = await client.chat.completions.create({ model: model.id, messages: say(`I am ${model.id}`) })
      expect(body.choices[0].message.content, model.id).toBe(`I am ${model.id}`)
      expect(body.model).toBe(model.id)
      // Reasoning models reason hidden here; the tokens still show in the usage details.
      const reasoning = body.usage!.completion_tokens_details!.reasoning_tokens!
      expect(reasoning > 0, model.id).toBe(model.capabilities.reasoning)
      const runner = client.chat.completions.stream({ model: model.id, messages: say("streamed") })
      expect((await runner.finalChatCompletion()).choices[0].message.content, model.id).toBe("streamed")
    }
  })
})
