/** Chat Completions request → canonical request: every field, role and part, and errors naming the field. */
import { describe, expect, it } from "vitest"
import { chatDialect } from "../../../src/dialects/chat/index.ts"
import { decodeErrorWith, decodeWith } from "./support.ts"

const decode = decodeWith(chatDialect)
const decodeError = decodeErrorWith(chatDialect)
const base = { model: "gpt-4o-mini", messages: [{ role: "user", content: "hi" }] }
const withBody = (extra: Record<string, unknown>) => decode({ ...base, ...extra })
const errorOf = (extra: Record<string, unknown>) => decodeError({ ...base, ...extra })
const PNG = "iVBORw0KGgo="

describe("chat decode: messages", () => {
  it("keeps the model name as sent and turns a string into one text block", () => {
    const { request, echo } = decode(base)
    expect(request.model).toBe("gpt-4o-mini")
    expect(request.messages).toEqual([{ role: "user", content: [{ type: "text", text: "hi" }] }])
    expect(request.stream).toBe(false)
    expect(echo).toEqual({ includeUsage: false })
  })

  it("hoists system and developer text, in order, onto the request", () => {
    const { request } = decode({
      model: "m",
      messages: [
        { role: "system", content: "be brief" },
        { role: "user", content: "hi" },
        { role: "developer", content: [{ type: "text", text: "a" }, { type: "text", text: "b" }] }
      ]
    })
    expect(request.system).toEqual([{ type: "text", text: "be brief" }, { type: "text", text: "a" }, { type: "text", text: "b" }])
    expect(request.messages).toHaveLength(1)
  })

  it("decodes user parts: text, data-URL and http images, PDF and text files", () => {
    const { request } = withBody({
      messages: [{
        role: "user",
        content: [
          { type: "text", text: "look" },
          { type: "image_url", image_url: { url: `data:image/png;base64,${PNG}`, detail: "high" } },
          { type: "image_url", image_url: { url: "https://example.com/cat.jpg" } },
          { type: "image_url", image_url: "http://example.com/dog.png" },
          { type: "file", file: { filename: "a.pdf", file_data: "data:application/pdf;base64,JVBERi0=" } },
          { type: "file", file: { file_data: `data:text/plain;base64,${Buffer.from("plain words").toString("base64")}` } }
        ]
      }]
    })
    expect(request.messages[0].content).toEqual([
      { type: "text", text: "look" },
      { type: "image", source: { kind: "base64", mediaType: "image/png", data: PNG } },
      { type: "image", source: { kind: "url", url: "https://example.com/cat.jpg" } },
      { type: "image", source: { kind: "url", url: "http://example.com/dog.png" } },
      { type: "document", title: "a.pdf", source: { kind: "base64", mediaType: "application/pdf", data: "JVBERi0=" } },
      { type: "document", source: { kind: "text", mediaType: "text/plain", text: "plain words" } }
    ])
  })

  it("turns assistant tool calls into tool_use blocks and tool messages into one user turn", () => {
    const { request } = decode({
      model: "m",
      messages: [
        { role: "user", content: "weather in Paris and Rome?" },
        {
          role: "assistant",
          content: null,
          tool_calls: [
            { id: "call_1", type: "function", function: { name: "get_weather", arguments: "{\"city\":\"Paris\"}" } },
            { id: "call_2", type: "function", function: { name: "get_weather", arguments: "{\"city\":\"Ro" } }
          ]
        },
        { role: "tool", tool_call_id: "call_1", content: "18C" },
        { role: "tool", tool_call_id: "call_2", content: [{ type: "text", text: "21C" }] },
        { role: "user", content: "thanks" },
        { role: "assistant", content: "You are welcome", refusal: null }
      ]
    })
    expect(request.messages).toEqual([
      { role: "user", content: [{ type: "text", text: "weather in Paris and Rome?" }] },
      {
        role: "assistant",
        content: [
          { type: "tool_use", id: "call_1", name: "get_weather", input: { city: "Paris" } },
          // Unparsable arguments (a call cut by the ceiling) are kept verbatim.
          { type: "tool_use", id: "call_2", name: "get_weather", input: "{\"city\":\"Ro" }
        ]
      },
      {
        role: "user",
        content: [
          { type: "tool_result", toolUseId: "call_1", content: "18C", isError: false },
          { type: "tool_result", toolUseId: "call_2", content: [{ type: "text", text: "21C" }], isError: false }
        ]
      },
      { role: "user", content: [{ type: "text", text: "thanks" }] },
      { role: "assistant", content: [{ type: "text", text: "You are welcome" }] }
    ])
  })

  it("parses long arguments (past 64 Ki characters, in steps) to the same input, and keeps long broken ones verbatim", () => {
    const input = { rows: Array.from({ length: 300 }, (_, i) => `${i} é 😀 "q" ${"z".repeat(500)}`) }
    const broken = JSON.stringify(input).slice(0, -3)
    const { request } = decode({
      model: "m",
      messages: [
        { role: "user", content: "go" },
        { role: "assistant", content: null, tool_calls: [
          { id: "call_1", type: "function", function: { name: "f", arguments: JSON.stringify(input) } },
          { id: "call_2", type: "function", function: { name: "f", arguments: broken } }
        ] }
      ]
    })
    expect(request.messages[1]!.content).toEqual([
      { type: "tool_use", id: "call_1", name: "f", input },
      { type: "tool_use", id: "call_2", name: "f", input: broken }
    ])
  })

  it("refuses arguments nested deeper than a body may be, short or long (the gateway serializes them): a 400 naming the call", () => {
    for (const depth of [200, 40_000]) {
      const deep = "[".repeat(depth) + "]".repeat(depth)
      const error = decodeError({
        model: "m",
        messages: [{ role: "user", content: "go" }, { role: "assistant", content: null, tool_calls: [{ id: "c", type: "function", function: { name: "f", arguments: deep } }] }]
      })
      expect(error.param).toBe("messages[1].tool_calls[0].function.arguments")
      expect(error.message).toContain("nested deeper than the limit of 128 levels")
    }
    // At the limit itself, taken as it is.
    const atLimit = "[".repeat(128) + "]".repeat(128)
    const { request } = decode({ model: "m", messages: [{ role: "assistant", content: null, tool_calls: [{ id: "c", type: "function", function: { name: "f", arguments: atLimit } }] }] })
    expect(request.messages[0]!.content).toEqual([{ type: "tool_use", id: "c", name: "f", input: JSON.parse(atLimit) }])
  })

  it("names the deepest bad field", () => {
    const cases: Array<[unknown, string]> = [
      [{ messages: [{ role: "user", content: "x" }] }, "model"],
      [{ model: "m", messages: [] }, "messages"],
      [{ model: "m", messages: [{ role: "bot", content: "x" }] }, "messages[0].role"],
      [{ model: "m", messages: [{ role: "function", name: "f", content: "x" }] }, "messages[0].role"],
      [{ model: "m", messages: [{ role: "user", content: 5 }] }, "messages[0].content"],
      [{ model: "m", messages: [{ role: "tool", content: "x" }] }, "messages[0].tool_call_id"],
      [{ model: "m", messages: [{ role: "user", content: "a" }, { role: "user", content: "b" }, { role: "user", content: [{ type: "image_url", image_url: { url: 7 } }] }] }, "messages[2].content[0].image_url.url"],
      [{ model: "m", messages: [{ role: "user", content: [{ type: "image_url", image_url: { url: "ftp://x/y.png" } }] }] }, "messages[0].content[0].image_url.url"],
      [{ model: "m", messages: [{ role: "user", content: [{ type: "image_url", image_url: { url: "data:text/plain;base64,AA==" } }] }] }, "messages[0].content[0].image_url.url"],
      [{ model: "m", messages: [{ role: "user", content: [{ type: "video", video: {} }] }] }, "messages[0].content[0].type"],
      [{ model: "m", messages: [{ role: "user", content: [{ type: "file", file: { file_id: "file-1" } }] }] }, "messages[0].content[0].file.file_data"],
      [{ model: "m", messages: [{ role: "assistant", tool_calls: [{ id: "c", function: { name: "f", arguments: {} } }] }] }, "messages[0].tool_calls[0].function.arguments"]
    ]
    for (const [body, param] of cases) {
      const error = decodeError(body)
      expect(error.param, JSON.stringify(body)).toBe(param)
      expect(error.message.startsWith(`${param}: `)).toBe(true)
    }
  })

  it("refuses input_audio parts with a 400 naming the part", () => {
    const error = errorOf({ messages: [{ role: "user", content: [{ type: "text", text: "x" }, { type: "input_audio", input_audio: { data: "", format: "wav" } }] }] })
    expect(error._tag).toBe("InvalidRequest")
    expect(error.param).toBe("messages[0].content[1]")
    expect(error.message).toMatch(/input_audio/)
  })
})

describe("chat decode: parameters", () => {
  const tool = { type: "function", function: { name: "get_weather", description: "Weather", parameters: { type: "object", properties: { city: { type: "string" } } }, strict: true } }

  it("maps tools, tool_choice and parallel_tool_calls", () => {
    const { request } = withBody({ tools: [tool, { type: "function", function: { name: "noop" } }], tool_choice: "required", parallel_tool_calls: false })
    expect(request.tools).toEqual([
      { name: "get_weather", description: "Weather", inputSchema: tool.function.parameters, strict: true },
      { name: "noop", inputSchema: { type: "object", properties: {} } }
    ])
    expect(request.toolChoice).toEqual({ type: "any" })
    expect(request.parallelToolCalls).toBe(false)
    expect(withBody({ tools: [tool], tool_choice: "none" }).request.toolChoice).toEqual({ type: "none" })
    expect(withBody({ tools: [tool], tool_choice: "auto" }).request.toolChoice).toEqual({ type: "auto" })
    expect(withBody({ tools: [tool] }).request.toolChoice).toEqual({ type: "auto" })
    expect(withBody({ tools: [tool], tool_choice: { type: "function", function: { name: "get_weather" } } }).request.toolChoice)
      .toEqual({ type: "tool", name: "get_weather" })
    expect(errorOf({ tools: [tool], tool_choice: { type: "function", function: { name: "nope" } } }).param).toBe("tool_choice.function.name")
    expect(errorOf({ tools: [{ type: "custom", custom: { name: "x" } }] }).param).toBe("tools[0].type")
    expect(errorOf({ tools: [{ type: "function", function: { name: "has space" } }] }).param).toBe("tools[0].function.name")
  })

  it("takes the ceiling from max_completion_tokens over max_tokens", () => {
    expect(withBody({ max_tokens: 10 }).request.maxOutputTokens).toBe(10)
    expect(withBody({ max_completion_tokens: 20 }).request.maxOutputTokens).toBe(20)
    expect(withBody({ max_tokens: 10, max_completion_tokens: 20 }).request.maxOutputTokens).toBe(20)
    expect(withBody({}).request.maxOutputTokens).toBeUndefined()
    expect(errorOf({ max_tokens: 0 }).param).toBe("max_tokens")
    expect(errorOf({ max_completion_tokens: 1.5 }).param).toBe("max_completion_tokens")
  })

  it("checks sampling ranges and stop lists", () => {
    const { request } = withBody({ temperature: 0.3, top_p: 0.9, seed: 7, stop: "END" })
    expect(request).toMatchObject({ temperature: 0.3, topP: 0.9, seed: 7, stopSequences: ["END"] })
    expect(withBody({ stop: ["a", "b"] }).request.stopSequences).toEqual(["a", "b"])
    expect(errorOf({ temperature: 2.5 }).param).toBe("temperature")
    expect(errorOf({ top_p: -0.1 }).param).toBe("top_p")
    expect(errorOf({ stop: ["a", "b", "c", "d", "e"] }).param).toBe("stop")
  })

  it("maps stream and stream_options.include_usage", () => {
    const { request, echo } = withBody({ stream: true, stream_options: { include_usage: true } })
    expect(request.stream).toBe(true)
    expect(echo.includeUsage).toBe(true)
  })

  it("maps response formats and names a bad one", () => {
    expect(withBody({ response_format: { type: "text" } }).request.responseFormat).toEqual({ type: "text" })
    expect(withBody({ response_format: { type: "json_object" } }).request.responseFormat).toEqual({ type: "json_object" })
    const schema = { type: "object", properties: { a: { type: "integer" } }, required: ["a"], additionalProperties: false }
    expect(withBody({ response_format: { type: "json_schema", json_schema: { name: "A", schema, strict: true, description: "d" } } }).request.responseFormat)
      .toEqual({ type: "json_schema", name: "A", schema, strict: true, description: "d" })
    expect(withBody({ response_format: { type: "json_schema", json_schema: { name: "A", schema } } }).request.responseFormat)
      .toMatchObject({ strict: false })
    expect(errorOf({ response_format: { type: "yaml" } }).param).toBe("response_format.type")
    expect(errorOf({ response_format: { type: "json_schema", json_schema: { schema } } }).param).toBe("response_format.json_schema.name")
  })

  it("maps reasoning_effort to hidden reasoning", () => {
    expect(withBody({ reasoning_effort: "low" }).request.reasoning).toEqual({ enabled: true, visible: false, effort: "low" })
    expect(withBody({ reasoning_effort: "xhigh" }).request.reasoning).toEqual({ enabled: true, visible: false, effort: "high" })
    expect(withBody({ reasoning_effort: "none" }).request.reasoning).toEqual({ enabled: false, visible: false })
    expect(errorOf({ reasoning_effort: "max" }).param).toBe("reasoning_effort")
  })

  it("takes cache affinity from prompt_cache_key, then safety_identifier, then user", () => {
    expect(withBody({ user: "u", safety_identifier: "s", prompt_cache_key: "k" }).request).toMatchObject({ cacheAffinity: "k", user: "u" })
    expect(withBody({ user: "u", safety_identifier: "s" }).request.cacheAffinity).toBe("s")
    expect(withBody({ user: "u" }).request.cacheAffinity).toBe("u")
    expect(withBody({}).request.cacheAffinity).toBeUndefined()
    expect(withBody({ metadata: { team: "x" } }).request.metadata).toEqual({ team: "x" })
    expect(errorOf({ metadata: { team: 1 } }).param).toBe("metadata.team")
    // OpenAI's limits: 16 pairs, keys of 64 characters, values of 512.
    expect(withBody({ metadata: Object.fromEntries(Array.from({ length: 16 }, (_, i) => [`k${i}`, "v".repeat(512)])) }).request.metadata).toHaveProperty("k15")
    expect(errorOf({ metadata: Object.fromEntries(Array.from({ length: 17 }, (_, i) => [`k${i}`, "v"])) })).toMatchObject({ param: "metadata" })
    expect(errorOf({ metadata: { team: "v".repeat(513) } })).toMatchObject({ param: "metadata.team" })
    expect(errorOf({ metadata: { ["k".repeat(65)]: "v" } }).param).toMatch(/^metadata/)
  })

  it("supports only n=1 and refuses what it cannot honor", () => {
    expect(withBody({ n: 1 }).request.model).toBe("gpt-4o-mini")
    expect(errorOf({ n: 2 }).param).toBe("n")
    expect(errorOf({ logprobs: true }).param).toBe("logprobs")
    expect(errorOf({ modalities: ["text", "audio"] }).param).toBe("modalities")
    expect(errorOf({ functions: [{ name: "f" }] }).param).toBe("functions")
  })

  it("ignores unknown fields and treats null as not given", () => {
    const { request } = withBody({ frequency_penalty: 0.5, store: true, service_tier: "auto", temperature: null, stop: null, tools: null, n: null })
    expect(request.temperature).toBeUndefined()
    expect(request.stopSequences).toEqual([])
    expect(request.tools).toEqual([])
  })
})
