/**
 * Canonical request → upstream Chat Completions request, and back through the gateway's own chat
 * dialect: the round trip gives the same canonical request wherever the two forms can say the same.
 */
import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import { simulatorPlacement } from "../../../src/backends/simulator/simulator.ts"
import { chatCompletionsTarget, toWireRequest } from "../../../src/backends/openai-compatible/index.ts"
import { UnsupportedContent } from "../../../src/backends/openai-compatible/wire-request.ts"
import { chatDialect } from "../../../src/dialects/chat/index.ts"
import { assistantMessage, textBlock, userMessage } from "../../../src/model/content.ts"
import type { CanonicalRequest } from "../../../src/model/request.ts"
import { makeRequest } from "../../../src/model/request.ts"

const placement = simulatorPlacement({ modelId: "svc-up", upstreamModel: "up-model", reasoning: true })

/** A request that uses every feature both forms share. */
const rich: CanonicalRequest = makeRequest({
  model: "svc-up",
  system: [textBlock("Be brief."), textBlock("Use metric units.")],
  messages: [
    userMessage([
      textBlock("What is in these?"),
      { type: "image", source: { kind: "base64", mediaType: "image/png", data: "iVBORw0KGgo=" } },
      { type: "image", source: { kind: "url", url: "https://example.com/a.jpg" } },
      { type: "document", title: "report.pdf", source: { kind: "base64", mediaType: "application/pdf", data: "JVBERi0=" } }
    ]),
    assistantMessage([
      textBlock("Let me check."),
      { type: "tool_use", id: "call_1", name: "lookup", input: { q: "cats", n: 2 } },
      { type: "tool_use", id: "call_2", name: "lookup", input: "{\"q\":\"tru" }
    ]),
    userMessage([
      { type: "tool_result", toolUseId: "call_1", content: "two cats", isError: false },
      { type: "tool_result", toolUseId: "call_2", content: [textBlock("part one"), textBlock("part two")], isError: false }
    ]),
    assistantMessage("Cats."),
    userMessage("Thanks!")
  ],
  tools: [
    { name: "lookup", description: "Search", inputSchema: { type: "object", properties: { q: { type: "string" } } }, strict: true },
    { name: "noop", inputSchema: { type: "object", properties: {} } }
  ],
  toolChoice: { type: "tool", name: "lookup" },
  parallelToolCalls: false,
  maxOutputTokens: 500,
  temperature: 0.2,
  topP: 0.8,
  seed: 42,
  stopSequences: ["END", "STOP"],
  reasoning: { enabled: true, visible: false, effort: "low" },
  responseFormat: { type: "json_schema", name: "answer", schema: { type: "object" }, strict: true, description: "An answer" },
  cacheAffinity: "conv-1",
  user: "user-1",
  stream: false
})

describe("upstream target", () => {
  it("adds /v1 to a bare origin and keeps a configured path and query", () => {
    expect(chatCompletionsTarget("https://api.example.com")).toEqual({ origin: "https://api.example.com", path: "/v1/chat/completions" })
    expect(chatCompletionsTarget("http://127.0.0.1:9000/v1/")).toEqual({ origin: "http://127.0.0.1:9000", path: "/v1/chat/completions" })
    expect(chatCompletionsTarget("https://api.groq.com/openai/v1").path).toBe("/openai/v1/chat/completions")
    expect(chatCompletionsTarget("https://g.example/v1beta/openai").path).toBe("/v1beta/openai/chat/completions")
    expect(chatCompletionsTarget("https://az.example/openai/deployments/d?api-version=2024-10-21").path)
      .toBe("/openai/deployments/d/chat/completions?api-version=2024-10-21")
  })
})

describe("canonical → upstream wire request", () => {
  const wire = toWireRequest(rich, placement) as any

  it("names the upstream model and always streams with usage", () => {
    expect(wire.model).toBe("up-model")
    expect(wire.stream).toBe(true)
    expect(wire.stream_options).toEqual({ include_usage: true })
    expect(wire.max_completion_tokens).toBe(500)
    expect(wire.max_tokens).toBeUndefined()
    expect(wire.metadata).toBeUndefined()
    expect(wire).toMatchObject({ reasoning_effort: "low", prompt_cache_key: "conv-1", user: "user-1", stop: ["END", "STOP"], seed: 42 })
  })

  it("places tool results as tool messages right after the assistant's calls", () => {
    expect(wire.messages.map((m: any) => m.role)).toEqual(["system", "user", "assistant", "tool", "tool", "assistant", "user"])
    expect(wire.messages[2].tool_calls[1].function.arguments).toBe("{\"q\":\"tru")
    const mixed = toWireRequest(makeRequest({
      model: "m",
      messages: [userMessage([
        textBlock("see results"),
        { type: "tool_result", toolUseId: "c", content: [textBlock("chart:"), { type: "image", source: { kind: "url", url: "https://x/c.png" } }], isError: true }
      ])]
    }), placement) as any
    expect(mixed.messages).toEqual([
      { role: "tool", tool_call_id: "c", content: [{ type: "text", text: "chart:" }] },
      { role: "user", content: [{ type: "text", text: "see results" }, { type: "image_url", image_url: { url: "https://x/c.png" } }] }
    ])
  })

  it("sends no tool_choice without tools, no reasoning_effort to a non-reasoning placement", () => {
    const plain = toWireRequest(makeRequest({ model: "m", messages: [userMessage("hi")], toolChoice: { type: "any" }, parallelToolCalls: true, reasoning: { enabled: true, visible: false, effort: "high" } }), { ...placement, reasoning: false }) as any
    expect(plain.tools).toBeUndefined()
    expect(plain.tool_choice).toBeUndefined()
    expect(plain.parallel_tool_calls).toBeUndefined()
    expect(plain.reasoning_effort).toBeUndefined()
    expect(plain.messages).toEqual([{ role: "user", content: "hi" }])
    expect(plain.response_format).toBeUndefined()
  })

  it("refuses a document by URL, which this wire cannot carry", () => {
    const request = makeRequest({ model: "m", messages: [userMessage([{ type: "document", source: { kind: "url", url: "https://x/a.pdf" } }])] })
    expect(() => toWireRequest(request, placement)).toThrow(UnsupportedContent)
  })

  it("decodes back, through the chat dialect, to the same canonical request", () => {
    const { request } = Effect.runSync(chatDialect.decode(wire))
    expect(request).toEqual({ ...rich, model: "up-model", stream: true })
  })

  it("round-trips the simple cases exactly too", () => {
    for (const original of [
      makeRequest({ model: "m", messages: [userMessage("hi")] }),
      makeRequest({ model: "m", messages: [userMessage("hi")], responseFormat: { type: "json_object" }, toolChoice: { type: "none" }, tools: [rich.tools[1]] }),
      makeRequest({ model: "m", messages: [userMessage("hi")], tools: rich.tools, toolChoice: { type: "any" } })
    ]) {
      const { request } = Effect.runSync(chatDialect.decode(toWireRequest(original, { ...placement, upstreamModel: "m" })))
      expect(request).toEqual({ ...original, stream: true })
    }
  })
})
