/**
 * Decoding Responses request bodies: each input item kind, each option, and the 400s that name
 * the offending field.
 */
import { describe, expect, it } from "vitest"
import { decodeError, decodeOk } from "./fixtures.ts"

const body = (fields: Record<string, unknown>) => ({ model: "svc-atlas-1", input: "hi", ...fields })

describe("responses decode: input items", () => {
  it("a string input is one user message; instructions become the first system block", () => {
    const { request, echo } = decodeOk(body({ input: "hello", instructions: "Be brief." }))
    expect(request.messages).toEqual([{ role: "user", content: [{ type: "text", text: "hello" }] }])
    expect(request.system).toEqual([{ type: "text", text: "Be brief." }])
    expect(echo.instructions).toBe("Be brief.")
  })

  it("easy and typed messages of every role; system and developer text goes to system", () => {
    const { request } = decodeOk(body({
      instructions: "I",
      input: [
        { role: "system", content: "S" },
        { role: "developer", content: [{ type: "input_text", text: "D" }] },
        { role: "user", content: "u1" },
        { type: "message", role: "assistant", content: [{ type: "output_text", text: "a1", annotations: [] }] },
        { role: "user", content: "u2" },
        { role: "user", content: "u3" }
      ]
    }))
    expect(request.system.map((b) => b.text)).toEqual(["I", "S", "D"])
    expect(request.messages.map((m) => [m.role, m.content.map((b) => (b as { text: string }).text)])).toEqual([
      ["user", ["u1"]],
      ["assistant", ["a1"]],
      ["user", ["u2"]],
      ["user", ["u3"]]
    ])
  })

  it("images (data: and http URLs) and PDF / text files become image and document blocks", () => {
    const { request } = decodeOk(body({
      input: [{
        role: "user",
        content: [
          { type: "input_image", image_url: "data:image/png;base64,iVBORw0KGgo=" },
          { type: "input_image", image_url: "https://example.com/cat.jpg", detail: "auto" },
          { type: "input_file", filename: "a.pdf", file_data: "data:application/pdf;base64,JVBERi0=" },
          { type: "input_file", file_data: "data:text/plain;base64,aGVsbG8=" }
        ]
      }]
    }))
    expect(request.messages[0].content).toEqual([
      { type: "image", source: { kind: "base64", mediaType: "image/png", data: "iVBORw0KGgo=" } },
      { type: "image", source: { kind: "url", url: "https://example.com/cat.jpg" } },
      { type: "document", title: "a.pdf", source: { kind: "base64", mediaType: "application/pdf", data: "JVBERi0=" } },
      { type: "document", source: { kind: "text", mediaType: "text/plain", text: "hello" } }
    ])
  })

  it("a tool round trip: calls join the assistant turn, outputs the next user turn", () => {
    const { request } = decodeOk(body({
      input: [
        { role: "user", content: "weather?" },
        { type: "reasoning", id: "rs_1", summary: [{ type: "summary_text", text: "plan" }], encrypted_content: "sig" },
        { role: "assistant", content: "Checking." },
        { type: "function_call", call_id: "call_1", name: "get_weather", arguments: "{\"city\":\"Oslo\"}" },
        { type: "function_call", call_id: "call_2", name: "get_time", arguments: "" },
        { type: "function_call_output", call_id: "call_1", output: "rain" },
        { type: "function_call_output", call_id: "call_2", output: [{ type: "input_text", text: "noon" }] }
      ]
    }))
    expect(request.messages).toEqual([
      { role: "user", content: [{ type: "text", text: "weather?" }] },
      {
        role: "assistant",
        content: [
          { type: "thinking", thinking: "plan", signature: "sig" },
          { type: "text", text: "Checking." },
          { type: "tool_use", id: "call_1", name: "get_weather", input: { city: "Oslo" } },
          { type: "tool_use", id: "call_2", name: "get_time", input: {} }
        ]
      },
      {
        role: "user",
        content: [
          { type: "tool_result", toolUseId: "call_1", content: "rain", isError: false },
          { type: "tool_result", toolUseId: "call_2", content: [{ type: "text", text: "noon" }], isError: false }
        ]
      }
    ])
  })

  it("reasoning items: without encrypted_content they are dropped; with it and no summary, redacted", () => {
    const { request } = decodeOk(body({
      input: [
        { role: "user", content: "q" },
        { type: "reasoning", summary: [{ type: "summary_text", text: "unverifiable" }] },
        { type: "reasoning", summary: [], encrypted_content: "opaque" },
        { role: "assistant", content: "a" }
      ]
    }))
    expect(request.messages[1]).toEqual({
      role: "assistant",
      content: [{ type: "redacted_thinking", data: "opaque" }, { type: "text", text: "a" }]
    })
  })
})

describe("responses decode: options", () => {
  it("maps tools, tool_choice, sampling, ceiling, reasoning, format and cache affinity", () => {
    const tools = [{ type: "function", name: "get_weather", description: "Weather", parameters: { type: "object" }, strict: true }]
    const { request, echo } = decodeOk(body({
      tools,
      tool_choice: { type: "function", name: "get_weather" },
      parallel_tool_calls: false,
      temperature: 0.5,
      top_p: 0.9,
      max_output_tokens: 300,
      stream: true,
      reasoning: { effort: "high", summary: "auto" },
      text: { format: { type: "json_schema", name: "out", schema: { type: "object" }, strict: true } },
      store: true,
      previous_response_id: "resp_prev",
      prompt_cache_key: "conv-1",
      safety_identifier: "safe-1",
      user: "u-1",
      metadata: { team: "a" }
    }))
    expect(request).toMatchObject({
      tools: [{ name: "get_weather", description: "Weather", inputSchema: { type: "object" }, strict: true }],
      toolChoice: { type: "tool", name: "get_weather" },
      parallelToolCalls: false,
      temperature: 0.5,
      topP: 0.9,
      maxOutputTokens: 300,
      stream: true,
      reasoning: { enabled: true, visible: true, effort: "high" },
      responseFormat: { type: "json_schema", name: "out", schema: { type: "object" }, strict: true },
      cacheAffinity: "conv-1",
      user: "u-1",
      metadata: { team: "a" }
    })
    expect(echo).toMatchObject({ tools, store: true, previousResponseId: "resp_prev", reasoning: { effort: "high", summary: "auto" } })
  })

  it("defaults: auto tools, no reasoning, text format, stored (as OpenAI), not streaming", () => {
    const { request, echo } = decodeOk(body({}))
    expect(request).toMatchObject({ toolChoice: { type: "auto" }, reasoning: { enabled: false, visible: false }, responseFormat: { type: "text" }, stream: false })
    expect(echo).toMatchObject({ store: true, toolChoice: "auto", parallelToolCalls: true, text: { format: { type: "text" } }, reasoning: null })
  })

  it("tool_choice none / required, and cache affinity falls back to safety_identifier then user", () => {
    expect(decodeOk(body({ tool_choice: "none" })).request.toolChoice).toEqual({ type: "none" })
    expect(decodeOk(body({ tool_choice: "required" })).request.toolChoice).toEqual({ type: "any" })
    expect(decodeOk(body({ safety_identifier: "s", user: "u" })).request.cacheAffinity).toBe("s")
    expect(decodeOk(body({ user: "u" })).request.cacheAffinity).toBe("u")
    expect(decodeOk(body({ reasoning: { effort: "none" } })).request.reasoning).toEqual({ enabled: false, visible: false })
    expect(decodeOk(body({ text: { format: { type: "json_object" } } })).request.responseFormat).toEqual({ type: "json_object" })
  })
})

describe("responses decode: errors name the field", () => {
  const cases: Array<[string, Record<string, unknown>, string]> = [
    ["missing model", { model: undefined }, "model"],
    ["input of the wrong type", { input: 3 }, "input"],
    ["empty input list", { input: [] }, "input"],
    ["bad role", { input: [{ role: "robot", content: "x" }] }, "input[0].role"],
    ["non-string text", { input: [{ role: "user", content: [{ type: "input_text", text: 1 }] }] }, "input[0].content[0].text"],
    ["image by file id", { input: [{ role: "user", content: [{ type: "input_image", file_id: "file_1" }] }] }, "input[0].content[0].file_id"],
    ["image with a bad URL", { input: [{ role: "user", content: [{ type: "input_image", image_url: "ftp://x" }] }] }, "input[0].content[0].image_url"],
    ["file of an unsupported type", { input: [{ role: "user", content: [{ type: "input_file", file_data: "data:image/gif;base64,AA==" }] }] }, "input[0].content[0].file_data"],
    ["image in an assistant turn", { input: [{ role: "assistant", content: [{ type: "input_image", image_url: "https://x/y.png" }] }] }, "input[0].content[0].type"],
    ["call without call_id", { input: [{ type: "function_call", name: "f", arguments: "{}" }] }, "input[0].call_id"],
    ["call with broken arguments", { input: [{ type: "function_call", call_id: "c", name: "f", arguments: "{nope" }] }, "input[0].arguments"],
    ["call with arguments nested too deep", { input: [{ type: "function_call", call_id: "c", name: "f", arguments: "[".repeat(200) + "]".repeat(200) }] }, "input[0].arguments"],
    ["call with long arguments nested too deep", { input: [{ type: "function_call", call_id: "c", name: "f", arguments: "{\"a\":".repeat(40_000) + "1" + "}".repeat(40_000) }] }, "input[0].arguments"],
    ["call with long broken arguments", { input: [{ type: "function_call", call_id: "c", name: "f", arguments: `{"a":"${"é".repeat(100_000)}` }] }, "input[0].arguments"],
    ["output without call_id", { input: [{ type: "function_call_output", output: "x" }] }, "input[0].call_id"],
    ["item reference without stored items (the embedding API)", { input: [{ type: "item_reference", id: "msg_1" }] }, "input"],
    ["item reference without an id", { input: [{ type: "item_reference", id: 7 }] }, "input[0].id"],
    ["unknown item type", { input: [{ type: "computer_call" }] }, "input[0].type"],
    ["hosted tool", { tools: [{ type: "web_search" }] }, "tools[0].type"],
    ["tool without a name", { tools: [{ type: "function" }] }, "tools[0].name"],
    ["forced tool not among tools", { tools: [], tool_choice: { type: "function", name: "f" } }, "tool_choice.name"],
    ["bad tool_choice", { tool_choice: "always" }, "tool_choice"],
    ["zero ceiling", { max_output_tokens: 0 }, "max_output_tokens"],
    ["temperature out of range", { temperature: 3 }, "temperature"],
    ["bad effort", { reasoning: { effort: "extreme" } }, "reasoning.effort"],
    ["json_schema without schema", { text: { format: { type: "json_schema", name: "x" } } }, "text.format.schema"],
    ["unknown format", { text: { format: { type: "yaml" } } }, "text.format.type"],
    ["non-string metadata", { metadata: { a: 1 } }, "metadata.a"],
    ["a metadata value over 512 characters", { metadata: { a: "x".repeat(513) } }, "metadata.a"],
    ["more than 16 metadata pairs", { metadata: Object.fromEntries(Array.from({ length: 17 }, (_, i) => [`k${i}`, "v"])) }, "metadata"],
    ["non-boolean store", { store: "yes" }, "store"]
  ]
  it.each(cases)("%s → 400 naming %s", (_, fields, param) => {
    const error = decodeError(body(fields))
    expect(error._tag).toBe("InvalidRequest")
    expect(error.param).toBe(param)
    expect(error.message.startsWith(`${param}: `)).toBe(true)
  })
})
