/**
 * The non-streaming Response envelope: every field clients read, one output item per block, the
 * incomplete status, and the output decoding back to the same turn a stored transcript keeps.
 */
import { describe, expect, it } from "vitest"
import { outputAsInput, responsesDialect } from "../../../src/dialects/responses/index.ts"
import { collect } from "../../../src/model/events.ts"
import { makeUsage } from "../../../src/model/usage.ts"
import { contextFor, decodeOk, fullScript, usage } from "./fixtures.ts"

const encode = (script = fullScript(), body: Record<string, unknown> = {}) =>
  responsesDialect.encodeResponse(collect(script), contextFor(body)) as any

describe("responses encodeResponse", () => {
  it("a text answer: every envelope field, output_text part with annotations and logprobs", () => {
    const script = fullScript("end_turn").filter((e) => !("index" in e) || e.index === 1)
    const body = encode(script, { instructions: "Be brief.", temperature: 0.2, metadata: { a: "b" }, user: "u", store: true })
    expect(body).toEqual({
      id: "resp_TEST",
      object: "response",
      created_at: 1_700_000_000,
      status: "completed",
      error: null,
      incomplete_details: null,
      instructions: "Be brief.",
      max_output_tokens: null,
      model: "svc-atlas-1",
      output: [{
        id: "msg_TEST_0",
        type: "message",
        status: "completed",
        role: "assistant",
        content: [{ type: "output_text", text: "Hello world", annotations: [], logprobs: [] }]
      }],
      parallel_tool_calls: true,
      previous_response_id: null,
      prompt_cache_key: null,
      reasoning: null,
      safety_identifier: null,
      store: true,
      temperature: 0.2,
      text: { format: { type: "text" } },
      tool_choice: "auto",
      tools: [],
      top_p: null,
      truncation: "disabled",
      usage: { input_tokens: 12, input_tokens_details: { cached_tokens: 4 }, output_tokens: 30, output_tokens_details: { reasoning_tokens: 10 }, total_tokens: 42 },
      user: "u",
      metadata: { a: "b" }
    })
  })

  it("thinking, text and a tool call become reasoning, message and function_call items in order", () => {
    const tools = [{ type: "function", name: "get_weather", parameters: { type: "object" } }]
    const body = encode(fullScript(), { tools, reasoning: { effort: "low" } })
    expect(body.tools).toEqual(tools)
    expect(body.reasoning).toEqual({ effort: "low", summary: null })
    expect(body.output).toEqual([
      { id: "rs_TEST_0", type: "reasoning", summary: [{ type: "summary_text", text: "Let me think." }], encrypted_content: "c2lnbmF0dXJl" },
      expect.objectContaining({ id: "msg_TEST_1", type: "message" }),
      { id: "fc_TEST_2", type: "function_call", status: "completed", arguments: "{\"city\":\"Paris\"}", call_id: "call_abc", name: "get_weather" }
    ])
    expect(body.status).toBe("completed")
  })

  it("hitting the ceiling is incomplete with reason max_output_tokens; empty output is allowed", () => {
    const script = [
      { type: "message_start", model: "svc-vega-2" },
      { type: "message_stop", stopReason: "max_tokens", usage: makeUsage({ inputTokens: 5, outputTokens: 8, reasoningTokens: 8 }) }
    ] as const
    const body = encode([...script], { max_output_tokens: 8 })
    expect(body).toMatchObject({ status: "incomplete", incomplete_details: { reason: "max_output_tokens" }, output: [], max_output_tokens: 8 })
    expect(body.usage.output_tokens_details.reasoning_tokens).toBe(8)
  })

  it("the output, sent back as input items, decodes to the assistant turn a transcript stores", () => {
    const response = collect(fullScript())
    const output = encode().output
    const decoded = decodeOk({ model: "svc-atlas-1", input: output }).request.messages
    expect(decoded).toEqual([{ role: "assistant", content: outputAsInput(response.content) }])
    expect(outputAsInput(response.content)[2]).toMatchObject({ type: "tool_use", id: "call_abc" })
  })

  it("ids: resp_ prefix, unique per call", () => {
    const a = responsesDialect.newId()
    expect(a).toMatch(/^resp_[0-9A-Za-z]{24}$/)
    expect(responsesDialect.newId()).not.toBe(a)
    expect(usage.inputTokens).toBe(12)
  })
})
