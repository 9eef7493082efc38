/**
 * `/v1/messages` through the official `@anthropic-ai/sdk` against the real gateway process, on
 * every storage engine: plain and streamed answers, the stream helper, tools, thinking, the output
 * ceiling, stop sequences, compatibility handles and every catalog model.
 */
import Anthropic from "@anthropic-ai/sdk"
import { beforeAll, describe, expect, it } from "vitest"
import { engines } from "../../support/engines.ts"
import { type SharedGateway, sharedGateway } from "../../support/shared-gateway.ts"

const say = (text: string) => [{ role: "user" as const, content: `say exactly: ${text}` }]
const weatherTool = {
  name: "get_weather",
  description: "Current weather in a city",
  input_schema: { type: "object" as const, properties: { city: { type: "string" } }, required: ["city"] }
}

describe.each(engines())("Messages dialect with the Anthropic SDK ($name)", (engine) => {
  let gw: SharedGateway
  let client: Anthropic
  beforeAll(async () => {
    gw = await sharedGateway(engine)
    client = new Anthropic({ apiKey: gw.apiKey!, baseURL: gw.baseUrl, maxRetries: 0 })
  })

  it("messages.create answers with the message envelope, request-id and xsvc-model headers", async () => {
    const { data, response } = await client.messages.create({ model: "svc-lyra-3", max_tokens: 100, messages: say("hello gateway") }).withResponse()
    expect(data.id).toMatch(/^msg_[0-9A-Za-z]{24}$/)
    expect(data).toMatchObject({ type: "message", role: "assistant", model: "svc-lyra-3", stop_reason: "end_turn", stop_sequence: null })
    expect(data.content).toEqual([{ type: "text", text: "hello gateway" }])
    expect(data.usage.input_tokens).toBeGreaterThan(0)
    expect(data.usage.output_tokens).toBeGreaterThan(0)
    expect(response.headers.get("request-id")).toMatch(/^req_/)
    const again = await client.messages.create({ model: "svc-lyra-3", max_tokens: 100, messages: say("hello gateway") })
    expect(again._request_id).toMatch(/^req_/)
    expect(again._request_id).not.toBe(response.headers.get("request-id"))
    expect(response.headers.get("xsvc-model")).toBe("svc-lyra-3")
    expect(response.headers.get("content-type")).toContain("application/json")
  })

  it("messages.create with stream: true yields the events in order", async () => {
    const stream = await client.messages.create({ model: "svc-lyra-3", max_tokens: 100, messages: say("streamed words arrive"), stream: true })
    const types: Array<string> = []
    let text = ""
    for await (const event of stream) {
      types.push(event.type)
      if (event.type === "content_block_delta" && event.delta.type === "text_delta") text += event.delta.text
    }
    expect(text).toBe("streamed words arrive")
    expect(types[0]).toBe("message_start")
    expect(types.slice(-2)).toEqual(["message_delta", "message_stop"])
    expect(types.filter((t) => t === "content_block_start")).toHaveLength(1)
  })

  it("messages.stream() emits text events and assembles finalMessage()", async () => {
    const sentence = "the stream helper assembles every delta into one final message"
    const stream = client.messages.stream({ model: "svc-nova-mini", max_tokens: 100, messages: say(sentence) })
    const pieces: Array<string> = []
    stream.on("text", (delta) => pieces.push(delta))
    const final = await stream.finalMessage()
    expect(pieces.join("")).toBe(sentence)
    expect(pieces.length).toBeGreaterThan(1)
    expect(final.content).toEqual([{ type: "text", text: sentence }])
    expect(final.stop_reason).toBe("end_turn")
    expect(final.usage.output_tokens).toBeGreaterThan(0)
  })

  it("runs a tool call round trip: tool_use, then an answer that uses the tool_result", async () => {
    const question = { role: "user" as const, content: "What is the weather in Oslo? Use get_weather." }
    const first = await client.messages.create({ model: "svc-lyra-3", max_tokens: 400, tools: [weatherTool], messages: [question] })
    expect(first.stop_reason).toBe("tool_use")
    const call = first.content.find((block) => block.type === "tool_use")
    expect(call).toMatchObject({ type: "tool_use", name: "get_weather", id: expect.stringMatching(/\S/) })
    expect(typeof (call as { input: { city: unknown } }).input.city).toBe("string")
    const streamed = await client.messages.stream({ model: "svc-lyra-3", max_tokens: 400, tools: [weatherTool], messages: [question] }).finalMessage()
    expect(streamed.content.find((block) => block.type === "tool_use")).toMatchObject({ name: "get_weather" })
    const second = await client.messages.create({
      model: "svc-lyra-3",
      max_tokens: 400,
      tools: [weatherTool],
      messages: [
        question,
        { role: "assistant", content: first.content },
        { role: "user", content: [{ type: "tool_result", tool_use_id: call!.type === "tool_use" ? call!.id : "", content: "Sunny, 21 C" }] }
      ]
    })
    expect(second.stop_reason).toBe("end_turn")
    expect(second.content[0]).toMatchObject({ type: "text", text: expect.stringContaining("The get_weather tool returned: Sunny, 21 C.") })
  })

  it("thinking enabled on svc-atlas-1 puts a signed thinking block first, streamed or not", async () => {
    const params = { model: "svc-atlas-1", max_tokens: 4000, thinking: { type: "enabled" as const, budget_tokens: 1024 }, messages: say("after thought") }
    const plain = await client.messages.create(params)
    expect(plain.content.map((b) => b.type)).toEqual(["thinking", "text"])
    expect(plain.content[0]).toMatchObject({ thinking: expect.stringMatching(/\S/), signature: expect.stringMatching(/\S/) })
    expect(plain.content[1]).toEqual({ type: "text", text: "after thought" })
    const stream = client.messages.stream(params)
    let thinking = ""
    stream.on("thinking", (delta) => (thinking += delta))
    const final = await stream.finalMessage()
    expect(final.content[0].type).toBe("thinking")
    expect(thinking).toBe((final.content[0] as { thinking: string }).thinking)
    expect((final.content[0] as { signature: string }).signature).toBe((plain.content[0] as { signature: string }).signature)
    // The signed block goes back on the next turn unchanged.
    const next = await client.messages.create({ ...params, messages: [...params.messages, { role: "assistant", content: plain.content }, ...say("again")] })
    expect(next.content.at(-1)).toEqual({ type: "text", text: "again" })
  })

  it("without thinking a reasoning model shows no thinking block", async () => {
    const answer = await client.messages.create({ model: "svc-atlas-1", max_tokens: 4000, messages: say("no visible thoughts") })
    expect(answer.content).toEqual([{ type: "text", text: "no visible thoughts" }])
  })

  it("stops at the output ceiling with stop_reason max_tokens", async () => {
    const answer = await client.messages.create({ model: "svc-lyra-3", max_tokens: 3, messages: say("one two three four five six seven eight nine ten") })
    expect(answer.stop_reason).toBe("max_tokens")
    expect(answer.usage.output_tokens).toBe(3)
    const streamed = await client.messages.stream({ model: "svc-lyra-3", max_tokens: 3, messages: say("one two three four five six seven") }).finalMessage()
    expect(streamed.stop_reason).toBe("max_tokens")
  })

  it("stops at a stop sequence and names it", async () => {
    const answer = await client.messages.create({ model: "svc-lyra-3", max_tokens: 100, stop_sequences: ["STOP"], messages: say("alpha beta STOP gamma") })
    expect(answer.stop_reason).toBe("stop_sequence")
    expect(answer.stop_sequence).toBe("STOP")
    expect(answer.content).toEqual([{ type: "text", text: "alpha beta " }])
  })

  it("serves the compatibility handle claude-sonnet-4-5 as svc-atlas-1", async () => {
    const { data, response } = await client.messages.create({ model: "claude-sonnet-4-5", max_tokens: 4000, messages: say("handled") }).withResponse()
    expect(response.headers.get("xsvc-model")).toBe("svc-atlas-1")
    expect(data.model).toBe("svc-atlas-1")
    expect(data.content).toEqual([{ type: "text", text: "handled" }])
  })

  it("every chat model of the catalog answers, preview included", async () => {
    const listed = (await (await fetch(`${gw.baseUrl}/v1/models`)).json() as { data: Array<{ id: string; tier: string }> }).data
    const ids = [...listed.filter((m) => m.tier !== "embedding").map((m) => m.id), "svc-atlas-2-preview"]
    expect(ids.length).toBeGreaterThanOrEqual(7)
    for (const model of ids) {
      const answer = await client.messages.create({ model, max_tokens: 4000, messages: say(`hello from ${model}`) })
      expect(answer.model).toBe(model)
      expect(answer.content.at(-1)).toEqual({ type: "text", text: `hello from ${model}` })
    }
  })
})
