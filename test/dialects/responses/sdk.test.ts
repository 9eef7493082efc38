/**
 * `POST /v1/responses` through the official `openai` SDK against the real gateway process, on every
 * storage engine: plain and streamed answers, the `responses.stream()` helper, function tools and
 * their round trip, visible reasoning, the hidden-reasoning ceiling (spec rule 3), every model.
 */
import OpenAI from "openai"
import { beforeAll, describe, expect, it } from "vitest"
import { engines } from "../../support/engines.ts"
import { fastConfig } from "../../support/fast-config.ts"
import { type SharedGateway, sharedGateway } from "../../support/shared-gateway.ts"

const weatherTool = {
  type: "function" as const,
  name: "get_weather",
  description: "Current weather for a city",
  parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
  strict: true
}

describe.each(engines())("responses over the openai SDK ($name)", (engine) => {
  let gw: SharedGateway
  let client: OpenAI
  beforeAll(async () => {
    gw = await sharedGateway(engine)
    client = new OpenAI({ apiKey: gw.apiKey!, baseURL: `${gw.baseUrl}/v1`, maxRetries: 0 })
  })

  it("create: the SDK's output_text, the envelope fields and xsvc-model", async () => {
    const { data, response } = await client.responses
      .create({ model: "svc-lyra-3", input: "say exactly: Hello from the gateway", instructions: "Be brief.", metadata: { run: "1" }, store: false })
      .withResponse()
    expect(data.output_text).toBe("Hello from the gateway")
    expect(data).toMatchObject({ object: "response", status: "completed", model: "svc-lyra-3", instructions: "Be brief.", store: false, previous_response_id: null, metadata: { run: "1" } })
    expect(data.id).toMatch(/^resp_/)
    expect(data.usage!.total_tokens).toBe(data.usage!.input_tokens + data.usage!.output_tokens)
    expect(response.headers.get("xsvc-model")).toBe("svc-lyra-3")
  })

  it("stream: true yields the typed events in order, ending with response.completed", async () => {
    const stream = await client.responses.create({ model: "svc-lyra-3", input: "say exactly: streamed words arrive", stream: true })
    const events: Array<any> = []
    for await (const event of stream) events.push(event)
    expect(events[0].type).toBe("response.created")
    expect(events.at(-1).type).toBe("response.completed")
    expect(events.map((e) => e.sequence_number)).toEqual(events.map((_, i) => i))
    const deltas = events.filter((e) => e.type === "response.output_text.delta").map((e) => e.delta).join("")
    expect(deltas).toBe("streamed words arrive")
    expect(events.at(-1).response.output[0].content[0].text).toBe("streamed words arrive")
  })

  it("responses.stream() accumulates to a finalResponse, text deltas with snapshots", async () => {
    const stream = client.responses.stream({ model: "svc-atlas-1", input: "say exactly: the helper works" })
    const snapshots: Array<string> = []
    stream.on("response.output_text.delta", (event) => snapshots.push(event.snapshot))
    const final = await stream.finalResponse()
    expect(final.output_text).toBe("the helper works")
    expect(snapshots.at(-1)).toBe("the helper works")
  })

  it("function tools: a function_call item, then a function_call_output round trip", async () => {
    const input: Array<any> = [{ role: "user", content: "What is the weather in Paris? Use get_weather." }]
    const first = await client.responses.create({ model: "svc-atlas-1", input, tools: [weatherTool], store: false })
    const call = first.output.find((item) => item.type === "function_call")!
    expect(call).toMatchObject({ type: "function_call", name: "get_weather", status: "completed" })
    expect(call.call_id).toMatch(/^call_/)
    expect(call.id).toMatch(/^fc_/)
    expect(typeof JSON.parse(call.arguments).city).toBe("string")
    expect(first.tools).toEqual([weatherTool])

    // store: false, so the client re-sends the whole transcript, output items included (rule 2).
    input.push(...first.output, { type: "function_call_output", call_id: call.call_id, output: "sunny, 24C" })
    const second = await client.responses.create({ model: "svc-atlas-1", input, tools: [weatherTool], store: false })
    expect(second.output_text).toContain("The get_weather tool returned: sunny, 24C.")
  })

  it("responses.stream() with a tool call: argument deltas accumulate to the final arguments", async () => {
    const stream = client.responses.stream({ model: "svc-lyra-3", input: "call get_weather now", tools: [weatherTool], tool_choice: "required" })
    let argumentSnapshot = ""
    stream.on("response.function_call_arguments.delta", (event) => (argumentSnapshot = event.snapshot))
    const final = await stream.finalResponse()
    const call = final.output.find((item) => item.type === "function_call")!
    expect(call.arguments).toBe(argumentSnapshot)
    expect(JSON.parse(call.arguments)).toHaveProperty("city")
  })

  it("reasoning.effort on svc-atlas-1 surfaces a reasoning item before the answer, streamed too", async () => {
    const body = { model: "svc-atlas-1", input: "say exactly: reasoned", reasoning: { effort: "low" as const } }
    const plain = await client.responses.create(body)
    expect(plain.output.map((item) => item.type)).toEqual(["reasoning", "message"])
    const reasoning = plain.output[0] as OpenAI.Responses.ResponseReasoningItem
    expect(reasoning.id).toMatch(/^rs_/)
    expect(reasoning.summary[0].text.length).toBeGreaterThan(0)
    expect(plain.usage!.output_tokens_details.reasoning_tokens).toBeGreaterThan(0)
    expect(plain.output_text).toBe("reasoned")

    const streamed = await client.responses.stream(body).finalResponse()
    expect(streamed.output.map((item) => item.type)).toEqual(["reasoning", "message"])
    expect((streamed.output[0] as OpenAI.Responses.ResponseReasoningItem).summary[0].text).toBe(reasoning.summary[0].text)
  })

  it("without reasoning, a reasoning model keeps its reasoning hidden (counted, not shown)", async () => {
    const response = await client.responses.create({ model: "svc-atlas-1", input: "say exactly: quiet" })
    expect(response.output.map((item) => item.type)).toEqual(["message"])
    expect(response.usage!.output_tokens_details.reasoning_tokens).toBeGreaterThan(0)
  })

  it("a tiny max_output_tokens on svc-vega-2 is eaten by hidden reasoning: incomplete, empty text (rule 3)", async () => {
    const response = await client.responses.create({ model: "svc-vega-2", input: "say exactly: never shown", max_output_tokens: 16 })
    expect(response.status).toBe("incomplete")
    expect(response.incomplete_details).toEqual({ reason: "max_output_tokens" })
    expect(response.output_text).toBe("")
    expect(response.usage!.output_tokens).toBe(16)

    const events: Array<any> = []
    for await (const event of await client.responses.create({ model: "svc-vega-2", input: "say exactly: x", max_output_tokens: 16, stream: true })) events.push(event)
    expect(events.at(-1)).toMatchObject({ type: "response.incomplete", response: { status: "incomplete" } })
  })

  it("every chat model in the catalog answers", async () => {
    for (const { id } of fastConfig().models) {
      const response = await client.responses.create({ model: id, input: `say exactly: hi from ${id}` })
      expect(response.output_text, id).toBe(`hi from ${id}`)
      expect(response.model).toBe(id)
    }
  })

  it("prompt_cache_key, safety_identifier and user are accepted and echoed", async () => {
    const response = await client.responses.create({
      model: "svc-pico-1",
      input: "say exactly: cached",
      prompt_cache_key: "conversation-42",
      safety_identifier: "user-hash-1",
      user: "legacy-user"
    })
    expect(response).toMatchObject({ prompt_cache_key: "conversation-42", safety_identifier: "user-hash-1", user: "legacy-user" })
    expect(response.output_text).toBe("cached")
  })

  it("bad requests are 400 invalid_request_error naming the field; unknown model 404", async () => {
    const error = await client.responses.create({ model: "svc-atlas-1", input: "x", tools: [{ type: "web_search" } as any] }).catch((e) => e)
    expect(error).toBeInstanceOf(OpenAI.BadRequestError)
    expect(error.type).toBe("invalid_request_error")
    expect(error.param).toBe("tools[0].type")
    const images = await client.responses
      .create({ model: "svc-vega-2", input: [{ role: "user", content: [{ type: "input_image", image_url: "https://example.com/a.png", detail: "auto" }] }] })
      .catch((e) => e)
    expect(images.status).toBe(400)
    expect(images.param).toBe("input")
    const unknown = await client.responses.create({ model: "svc-nope", input: "x" }).catch((e) => e)
    expect(unknown.status).toBe(404)
  })
})
