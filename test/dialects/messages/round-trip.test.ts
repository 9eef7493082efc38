/**
 * Round trips through both halves of the Messages wire:
 * - canonical request → (Anthropic adapter) Messages request → (dialect) decode → the same request;
 * - canonical events → (dialect) Messages SSE → (adapter) parser → the same events.
 */
import { Effect, Stream } from "effect"
import { describe, expect, it } from "vitest"
import { toWireRequest } from "../../../src/backends/anthropic/wire-request.ts"
import { translateMessagesSse } from "../../../src/backends/anthropic/wire-events.ts"
import { makeSimulatorBackend, simulatorPlacement } from "../../../src/backends/simulator/simulator.ts"
import { messagesDialect } from "../../../src/dialects/messages/index.ts"
import type { CanonicalEvent } from "../../../src/model/events.ts"
import type { CanonicalRequest } from "../../../src/model/request.ts"
import { makeRequest } from "../../../src/model/request.ts"
import { fullTurn } from "./fixtures.ts"

const PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="

const rich = makeRequest({
  model: "svc-atlas-1",
  system: [{ type: "text", text: "You are terse." }],
  messages: [
    {
      role: "user",
      content: [
        { type: "text", text: "Look at these" },
        { type: "image", source: { kind: "base64", mediaType: "image/png", data: PNG } },
        { type: "image", source: { kind: "url", url: "https://example.com/a.png" } },
        { type: "document", source: { kind: "base64", mediaType: "application/pdf", data: "JVBERi0x" }, title: "Spec" },
        { type: "document", source: { kind: "url", url: "https://example.com/a.pdf" } },
        { type: "document", source: { kind: "text", mediaType: "text/plain", text: "notes" } }
      ]
    },
    {
      role: "assistant",
      content: [
        { type: "thinking", thinking: "I should call the tool", signature: "c2ln" },
        { type: "redacted_thinking", data: "b3BhcXVl" },
        { type: "tool_use", id: "toolu_1", name: "get_weather", input: { city: "Oslo" } },
        { type: "tool_use", id: "toolu_2", name: "get_weather", input: { city: "Rome" } }
      ]
    },
    {
      role: "user",
      content: [
        { type: "tool_result", toolUseId: "toolu_1", content: "12 C", isError: false },
        { type: "tool_result", toolUseId: "toolu_2", content: [{ type: "text", text: "timeout" }], isError: true }
      ]
    }
  ],
  tools: [{ name: "get_weather", description: "Weather", inputSchema: { type: "object", properties: { city: { type: "string" } } } }],
  toolChoice: { type: "tool", name: "get_weather" },
  parallelToolCalls: false,
  maxOutputTokens: 1000,
  temperature: 0.3,
  topP: 0.8,
  topK: 20,
  stopSequences: ["###"],
  cacheAffinity: "conv-1",
  stream: true
})

/** The adapter's wire request, through JSON as it would travel, decoded by the dialect. */
const throughTheWire = (request: CanonicalRequest) =>
  Effect.runPromise(messagesDialect.decode(JSON.parse(JSON.stringify(toWireRequest(request, { upstreamModel: "upstream-model-x", reasoning: true }))))).then((d) => d.request)

describe("canonical request → Messages request → canonical request", () => {
  it("keeps every block kind and field of a rich request", async () => {
    expect(await throughTheWire(rich)).toEqual({ ...rich, model: "upstream-model-x" })
  })

  it("keeps visible reasoning with its budget, and auto choice with parallel calls", async () => {
    const request = makeRequest({
      model: "svc-atlas-1",
      messages: [{ role: "user", content: [{ type: "text", text: "think" }] }],
      tools: [{ name: "t", inputSchema: { type: "object" } }],
      parallelToolCalls: true,
      maxOutputTokens: 8000,
      reasoning: { enabled: true, visible: true, budgetTokens: 2048 },
      stream: true
    })
    expect(await throughTheWire(request)).toEqual({ ...request, model: "upstream-model-x" })
  })
})

/** What the dialect writes for these events, read back by the adapter. */
const throughSse = (events: ReadonlyArray<CanonicalEvent>, modelId: string) => {
  const encoder = messagesDialect.streamEncoder({ id: "msg_x", model: modelId, createdAt: 0, request: rich, echo: undefined })
  return translateMessagesSse(events.map((event) => encoder.event(event)).join(""), modelId)
}

const simulate = (request: CanonicalRequest, reasoning: boolean) =>
  Effect.runPromise(Stream.runCollect(makeSimulatorBackend().stream(request, simulatorPlacement({ modelId: "svc-atlas-1", reasoning }))))

describe("canonical events → Messages SSE → canonical events", () => {
  it("reads back every block kind, with the signature parts joined into one delta", () => {
    const { events, error } = throughSse(fullTurn, "svc-atlas-1")
    expect(error).toBeUndefined()
    const joined = fullTurn.filter((e) => !(e.type === "signature_delta" && e.signature === "c2ln"))
      .map((e) => (e.type === "signature_delta" ? { ...e, signature: "c2lnbmF0dXJl" } : e))
    expect(events).toEqual(joined)
  })

  it("reads back simulator turns exactly: thinking + text, and tool calls", async () => {
    const thinking = await simulate(makeRequest({
      model: "svc-atlas-1",
      messages: [{ role: "user", content: [{ type: "text", text: "say exactly: round trip" }] }],
      reasoning: { enabled: true, visible: true },
      maxOutputTokens: 2000
    }), true)
    const tools = await simulate(makeRequest({
      model: "svc-atlas-1",
      messages: [{ role: "user", content: [{ type: "text", text: "use lookup and clock" }] }],
      tools: [
        { name: "lookup", inputSchema: { type: "object", properties: { q: { type: "string" } }, required: ["q"] } },
        { name: "clock", inputSchema: { type: "object", properties: {} } }
      ]
    }), false)
    for (const events of [thinking, tools]) {
      const back = throughSse(events, "svc-atlas-1")
      expect(back.error).toBeUndefined()
      expect(back.events).toEqual(events)
    }
    expect(thinking.map((e) => e.type)).toContain("thinking_delta")
    expect(tools.filter((e) => e.type === "block_start").length).toBe(2)
  })
})
