/**
 * The OpenAI-compatible backend against the real standalone simulator (`gateway simulate`, a
 * separate process serving Chat Completions with the gateway's dialect): text, tool calls, usage,
 * credentials, and an injected mid-stream break.
 */
import { Cause, Effect, Exit, Stream } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import type { PlacementRuntime } from "../../../src/backends/backend.ts"
import { makeOpenAICompatibleBackend } from "../../../src/backends/openai-compatible/index.ts"
import { userMessage } from "../../../src/model/content.ts"
import { eventOrderViolation } from "../../../src/model/event-order.ts"
import type { CanonicalEvent } from "../../../src/model/events.ts"
import { collect } from "../../../src/model/events.ts"
import type { CanonicalRequest } from "../../../src/model/request.ts"
import { makeRequest } from "../../../src/model/request.ts"
import { type SimulateUpstream, startSimulateUpstream } from "../../support/simulate-process.ts"

const API_KEY = "sim-secret"

describe("openai-compatible backend against `gateway simulate`", () => {
  const backend = makeOpenAICompatibleBackend()
  let simulator: SimulateUpstream
  beforeAll(async () => {
    simulator = await startSimulateUpstream(API_KEY)
  })
  afterAll(async () => {
    await backend.close()
    await simulator?.stop()
  })

  const placement = (apiKey = API_KEY): PlacementRuntime => ({
    id: "sim-a",
    modelId: "svc-remote",
    upstreamModel: "remote-model-7",
    reasoning: false,
    upstream: { baseUrl: `${simulator.baseUrl}/v1`, apiKey },
    faults: { mode: "none" }
  })
  const ask = (text: string, init: Partial<CanonicalRequest> = {}) => makeRequest({ model: "svc-remote", messages: [userMessage(text)], ...init })
  const run = (request: CanonicalRequest, at = placement()) => Effect.runPromise(Stream.runCollect(backend.stream(request, at)))
  const setFaults = (body: unknown) =>
    fetch(`${simulator.baseUrl}/_simulator/faults`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) })

  it("streams text and usage under the catalog model's name", async () => {
    const events = await run(ask("say exactly: from the other process"))
    expect(eventOrderViolation(events)).toBeUndefined()
    const response = collect(events)
    expect(response.content).toEqual([{ type: "text", text: "from the other process" }])
    expect(response.model).toBe("svc-remote")
    expect(response.stopReason).toBe("end_turn")
    expect(response.usage.inputTokens).toBeGreaterThan(0)
    expect(response.usage.outputTokens).toBeGreaterThan(0)
    expect(JSON.stringify(events)).not.toContain("remote-model-7")
  })

  it("streams parallel tool calls and honors the ceiling", async () => {
    const tools = [
      { name: "get_weather", inputSchema: { type: "object", properties: { city: { type: "string" } }, required: ["city"] } },
      { name: "get_time", inputSchema: { type: "object", properties: { zone: { type: "string" } }, required: ["zone"] } }
    ]
    const calls = collect(await run(ask("call get_weather and get_time", { tools })))
    expect(calls.stopReason).toBe("tool_use")
    expect(calls.content.map((block) => block.type === "tool_use" && block.name)).toEqual(["get_weather", "get_time"])
    const capped = collect(await run(ask("Tell me a long story.", { maxOutputTokens: 4 })))
    expect(capped.stopReason).toBe("max_tokens")
    expect(capped.usage.outputTokens).toBe(4)
  })

  it("fails retryably when the upstream refuses the gateway's key", async () => {
    const exit = await Effect.runPromiseExit(Stream.runCollect(backend.stream(ask("hi"), placement("wrong-key"))))
    expect(Exit.isFailure(exit) && Cause.findErrorOption(exit.cause)).toMatchObject({ _tag: "Some", value: { status: 502, retryable: true } })
  })

  it("fails the stream after the first events when the upstream breaks mid-stream", async () => {
    expect((await setFaults({ mode: "break-mid-stream", status: 500 })).status).toBe(200)
    try {
      const events: Array<CanonicalEvent> = []
      const exit = await Effect.runPromiseExit(Stream.runForEach(backend.stream(ask("Tell me about the sea."), placement()), (e) => Effect.sync(() => events.push(e))))
      expect(Exit.isFailure(exit)).toBe(true)
      expect(events[0]).toMatchObject({ type: "message_start", model: "svc-remote" })
      expect(events.some((e) => e.type === "text_delta")).toBe(true)
      expect(events.some((e) => e.type === "message_stop")).toBe(false)
    } finally {
      await setFaults({ mode: "none" })
    }
  })
})
