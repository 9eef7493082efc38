/**
 * Messages wire request → canonical request: every block kind and field, and validation errors
 * that name the field path.
 */
import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import { decodeCountTokens, messagesDialect } from "../../../src/dialects/messages/index.ts"
import { makeRequest } from "../../../src/model/request.ts"

const PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
const PDF = "JVBERi0xLjQKJcTl8uXrp/Og0MTGCjEgMCBvYmoK"

const decode = (body: unknown) => Effect.runPromise(messagesDialect.decode(body)).then((d) => d.request)
const decodeError = (body: unknown) => Effect.runPromise(Effect.flip(messagesDialect.decode(body)))
const base = { model: "svc-atlas-1", max_tokens: 100 }
const user = (content: unknown) => ({ ...base, messages: [{ role: "user", content }] })

describe("messages decode: fields", () => {
  it("maps a minimal body to the canonical defaults, keeping the model name as sent", async () => {
    const request = await decode({ model: "claude-sonnet-4-5", max_tokens: 5, messages: [{ role: "user", content: "hi" }], unknown_field: 1 })
    expect(request).toEqual(makeRequest({
      model: "claude-sonnet-4-5",
      messages: [{ role: "user", content: [{ type: "text", text: "hi" }] }],
      maxOutputTokens: 5
    }))
  })

  it("maps every optional field", async () => {
    const request = await decode({
      ...base,
      system: [{ type: "text", text: "be brief", cache_control: { type: "ephemeral" } }, { type: "text", text: "be kind" }],
      messages: [{ role: "user", content: "hi" }],
      tools: [{ name: "get_weather", description: "Weather", input_schema: { type: "object", properties: { city: { type: "string" } } } }],
      tool_choice: { type: "tool", name: "get_weather", disable_parallel_tool_use: true },
      temperature: 0.5,
      top_p: 0.9,
      top_k: 40,
      stop_sequences: ["END"],
      stream: true,
      thinking: { type: "enabled", budget_tokens: 2048 },
      metadata: { user_id: "conv-7" }
    })
    expect(request).toMatchObject({
      system: [{ type: "text", text: "be brief" }, { type: "text", text: "be kind" }],
      tools: [{ name: "get_weather", description: "Weather", inputSchema: { type: "object", properties: { city: { type: "string" } } } }],
      toolChoice: { type: "tool", name: "get_weather" },
      parallelToolCalls: false,
      temperature: 0.5,
      topP: 0.9,
      topK: 40,
      stopSequences: ["END"],
      stream: true,
      reasoning: { enabled: true, visible: true, budgetTokens: 2048 },
      cacheAffinity: "conv-7"
    })
  })

  it("maps system strings, tool choices, disabled thinking, effort and output format", async () => {
    const a = await decode({ ...user("hi"), system: "sys", tool_choice: { type: "any", disable_parallel_tool_use: false }, thinking: { type: "disabled" } })
    expect(a.system).toEqual([{ type: "text", text: "sys" }])
    expect(a.toolChoice).toEqual({ type: "any" })
    expect(a.parallelToolCalls).toBe(true)
    expect(a.reasoning).toEqual({ enabled: false, visible: false })
    const b = await decode({ ...user("hi"), tool_choice: { type: "none" }, output_config: { effort: "max", format: { type: "json_schema", schema: { type: "object" } } } })
    expect(b.toolChoice).toEqual({ type: "none" })
    expect(b.parallelToolCalls).toBeUndefined()
    expect(b.reasoning).toEqual({ enabled: false, visible: false, effort: "high" })
    expect(b.responseFormat).toEqual({ type: "json_schema", name: "output", schema: { type: "object" }, strict: true })
    const c = await decode({ ...user("hi"), thinking: { type: "adaptive", display: "omitted" }, temperature: null })
    expect(c.reasoning).toEqual({ enabled: true, visible: false })
    expect(c.temperature).toBeUndefined()
  })

  it("merges consecutive same-role turns and lifts system turns into the system prompt", async () => {
    const request = await decode({
      ...base,
      messages: [
        { role: "system", content: "rules" },
        { role: "user", content: "one" },
        { role: "user", content: [{ type: "text", text: "two" }] },
        { role: "assistant", content: "ok" }
      ]
    })
    expect(request.system).toEqual([{ type: "text", text: "rules" }])
    expect(request.messages).toEqual([
      { role: "user", content: [{ type: "text", text: "one" }, { type: "text", text: "two" }] },
      { role: "assistant", content: [{ type: "text", text: "ok" }] }
    ])
  })
})

describe("messages decode: blocks", () => {
  it("decodes images, documents and tool results in user turns", async () => {
    const request = await decode(user([
      { type: "image", source: { type: "base64", media_type: "image/png", data: PNG } },
      { type: "image", source: { type: "url", url: "https://example.com/cat.jpg" } },
      { type: "document", source: { type: "base64", media_type: "application/pdf", data: PDF }, title: "Report" },
      { type: "document", source: { type: "url", url: "https://example.com/a.pdf" } },
      { type: "document", source: { type: "text", media_type: "text/plain", data: "plain words" } },
      { type: "tool_result", tool_use_id: "toolu_1", content: "42" },
      { type: "tool_result", tool_use_id: "toolu_2", is_error: true, content: [{ type: "text", text: "boom" }, { type: "image", source: { type: "base64", media_type: "image/png", data: PNG } }] },
      { type: "tool_result", tool_use_id: "toolu_3" }
    ]))
    expect(request.messages[0].content).toEqual([
      { type: "image", source: { kind: "base64", mediaType: "image/png", data: PNG } },
      { type: "image", source: { kind: "url", url: "https://example.com/cat.jpg" } },
      { type: "document", source: { kind: "base64", mediaType: "application/pdf", data: PDF }, title: "Report" },
      { type: "document", source: { kind: "url", url: "https://example.com/a.pdf" } },
      { type: "document", source: { kind: "text", mediaType: "text/plain", text: "plain words" } },
      { type: "tool_result", toolUseId: "toolu_1", content: "42", isError: false },
      {
        type: "tool_result",
        toolUseId: "toolu_2",
        isError: true,
        content: [{ type: "text", text: "boom" }, { type: "image", source: { kind: "base64", mediaType: "image/png", data: PNG } }]
      },
      { type: "tool_result", toolUseId: "toolu_3", content: "", isError: false }
    ])
  })

  it("decodes thinking, redacted thinking and tool calls in assistant turns", async () => {
    const request = await decode({
      ...base,
      messages: [
        { role: "user", content: "weather?" },
        {
          role: "assistant",
          content: [
            { type: "thinking", thinking: "let me see", signature: "sig==" },
            { type: "redacted_thinking", data: "opaque" },
            { type: "text", text: "calling" },
            { type: "tool_use", id: "toolu_1", name: "get_weather", input: { city: "Oslo" } }
          ]
        }
      ]
    })
    expect(request.messages[1].content).toEqual([
      { type: "thinking", thinking: "let me see", signature: "sig==" },
      { type: "redacted_thinking", data: "opaque" },
      { type: "text", text: "calling" },
      { type: "tool_use", id: "toolu_1", name: "get_weather", input: { city: "Oslo" } }
    ])
  })
})

describe("messages decode: validation names the field", () => {
  const cases: Array<[string, unknown, string]> = [
    ["missing max_tokens", { model: "m", messages: [{ role: "user", content: "hi" }] }, "max_tokens"],
    ["max_tokens below 1", { ...user("hi"), max_tokens: 0 }, "max_tokens"],
    ["fractional max_tokens", { ...user("hi"), max_tokens: 1.5 }, "max_tokens"],
    ["missing messages", { ...base }, "messages"],
    ["empty messages", { ...base, messages: [] }, "messages"],
    ["bad role", { ...base, messages: [{ role: "tool", content: "x" }] }, "messages[0].role"],
    ["bad base64 image data", user([{ type: "text", text: "a" }, { type: "image", source: { type: "base64", media_type: "image/png", data: "data:image/png;base64,AAAA" } }]), "messages[0].content[1].source.data"],
    ["bad image media type", user([{ type: "image", source: { type: "base64", media_type: "image/bmp", data: PNG } }]), "messages[0].content[0].source.media_type"],
    ["unknown block type", user([{ type: "hologram" }]), "messages[0].content[0].type"],
    ["tool_result without id", user([{ type: "tool_result", content: "x" }]), "messages[0].content[0].tool_use_id"],
    ["temperature above 1", { ...user("hi"), temperature: 1.5 }, "temperature"],
    ["top_k negative", { ...user("hi"), top_k: -1 }, "top_k"],
    ["tool without input_schema", { ...user("hi"), tools: [{ name: "t" }] }, "tools[0].input_schema"],
    ["server tool type", { ...user("hi"), tools: [{ type: "web_search_20250305", name: "web_search", input_schema: {} }] }, "tools[0].type"],
    ["tool_choice tool without name", { ...user("hi"), tool_choice: { type: "tool" } }, "tool_choice.name"],
    ["bad thinking budget", { ...user("hi"), thinking: { type: "enabled", budget_tokens: 0 } }, "thinking.budget_tokens"],
    ["stop_sequences not strings", { ...user("hi"), stop_sequences: [1] }, "stop_sequences[0]"],
    ["tool_use in a user turn", user([{ type: "tool_use", id: "t", name: "n", input: {} }]), "messages[0].content[0]"],
    ["tool_choice names no tool", { ...user("hi"), tools: [{ name: "a", input_schema: {} }], tool_choice: { type: "tool", name: "b" } }, "tool_choice.name"]
  ]
  it.each(cases)("%s → 400 naming %s", async (_, body, path) => {
    const error = await decodeError(body)
    expect(error._tag).toBe("InvalidRequest")
    expect(error).toMatchObject({ param: path })
    expect(error.message.startsWith(`${path}:`)).toBe(true)
  })

  it("a tool_result in an assistant turn is refused", async () => {
    const error = await decodeError({ ...base, messages: [{ role: "user", content: "x" }, { role: "assistant", content: [{ type: "tool_result", tool_use_id: "t" }] }] })
    expect(error).toMatchObject({ param: "messages[1].content[0]" })
    expect(error.message).toContain("tool_result blocks belong in user turns")
  })
})

describe("count_tokens body", () => {
  it("needs no max_tokens and ignores one that is sent", async () => {
    const request = await Effect.runPromise(decodeCountTokens({ model: "m", messages: [{ role: "user", content: "hi" }] }))
    expect(request.maxOutputTokens).toBeUndefined()
    const withMax = await Effect.runPromise(decodeCountTokens({ model: "m", max_tokens: "nonsense", messages: [{ role: "user", content: "hi" }] }))
    expect(withMax.messages).toHaveLength(1)
  })
})
