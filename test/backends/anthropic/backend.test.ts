/**
 * The Anthropic backend over real HTTP against the `gateway simulate` upstream's server (answers
 * written by the Messages dialect's encoder), in this process: the upstream's process is not the
 * subject (simulate.test.ts runs the command's process). Scripted upstream failures are in `scripted.test.ts`.
 */
import { Effect } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { makeAnthropicBackend } from "../../../src/backends/anthropic/index.ts"
import { eventOrderViolation } from "../../../src/model/event-order.ts"
import { collect } from "../../../src/model/events.ts"
import type { CanonicalRequestInit } from "../../../src/model/request.ts"
import { makeRequest } from "../../../src/model/request.ts"
import { countTextTokensExact as countTextTokens } from "../../../src/model/bpe.ts"
import { placementFor, runAll, SECRET_MODEL, UPSTREAM_KEY } from "./support.ts"
import { type SimulateUpstream, startInProcessSimulateUpstream } from "./upstreams.ts"

const ask = (text: string, init: Partial<CanonicalRequestInit> = {}) =>
  makeRequest({ model: "svc-atlas-1", messages: [{ role: "user", content: [{ type: "text", text }] }], maxOutputTokens: 4000, ...init })

const backend = makeAnthropicBackend()

describe("Anthropic backend against the simulate upstream", () => {
  let upstream: SimulateUpstream
  beforeAll(async () => {
    upstream = await startInProcessSimulateUpstream(UPSTREAM_KEY)
  })
  afterAll(async () => {
    await backend.close()
    await upstream?.stop()
  })

  const call = (request: ReturnType<typeof ask>, placement = placementFor(upstream.baseUrl)) => runAll(backend.stream(request, placement))

  it("streams a text answer as canonical events under the catalog id", async () => {
    const { events, error } = await call(ask("say exactly: hello from upstream"))
    expect(error).toBeUndefined()
    expect(eventOrderViolation(events)).toBeUndefined()
    expect(events[0]).toMatchObject({ type: "message_start", model: "svc-atlas-1" })
    const response = collect(events)
    expect(response.content).toEqual([{ type: "text", text: "hello from upstream" }])
    expect(response.stopReason).toBe("end_turn")
    expect(response.usage.inputTokens).toBeGreaterThan(0)
    expect(response.usage.outputTokens).toBe(countTextTokens("hello from upstream"))
    expect(JSON.stringify(events)).not.toContain(SECRET_MODEL)
  })

  it("streams a tool call", async () => {
    const tools = [{ name: "get_weather", inputSchema: { type: "object", properties: { city: { type: "string" } }, required: ["city"] } }]
    const { events, error } = await call(ask("Use get_weather for Oslo", { tools }))
    expect(error).toBeUndefined()
    expect(eventOrderViolation(events)).toBeUndefined()
    const response = collect(events)
    expect(response.stopReason).toBe("tool_use")
    expect(response.content).toEqual([{ type: "tool_use", id: expect.stringMatching(/\S/), name: "get_weather", input: { city: expect.any(String) } }])
  })

  it("streams a signed thinking block before the text when reasoning is visible", async () => {
    const { events, error } = await call(ask("say exactly: thought through", { reasoning: { enabled: true, visible: true, budgetTokens: 1024 } }))
    expect(error).toBeUndefined()
    const response = collect(events)
    expect(response.content.map((b) => b.type)).toEqual(["thinking", "text"])
    expect(response.content[0]).toMatchObject({ thinking: expect.stringMatching(/\S/), signature: expect.stringMatching(/\S/) })
    expect(response.usage.reasoningTokens).toBeGreaterThan(0)
    expect(response.usage.outputTokens).toBeGreaterThan(response.usage.reasoningTokens)
  })

  it("honors the ceiling and stop sequences upstream", async () => {
    const cut = collect((await call(ask("say exactly: one two three four five six seven", { maxOutputTokens: 2 }))).events)
    expect(cut.stopReason).toBe("max_tokens")
    expect(cut.usage.outputTokens).toBe(2)
    const stopped = collect((await call(ask("say exactly: alpha STOP beta", { stopSequences: ["STOP"] }))).events)
    expect(stopped).toMatchObject({ stopReason: "stop_sequence", stopSequence: "STOP", content: [{ type: "text", text: "alpha " }] })
  })

  it("a mid-stream error event fails the stream after the first events, retryably", async () => {
    await upstream.setFaults({ mode: "break-mid-stream", status: 529 })
    try {
      const { events, error } = await call(ask("say exactly: this answer will break in the middle of its words"))
      expect(events[0]?.type).toBe("message_start")
      expect(events.some((e) => e.type === "text_delta")).toBe(true)
      expect(events.some((e) => e.type === "message_stop")).toBe(false)
      expect(error).toMatchObject({ _tag: "BackendError", type: "overloaded_error", retryable: true })
    } finally {
      await upstream.setFaults({ mode: "none" })
    }
  })

  it("an upstream that refuses the request before streaming is a retryable 5xx", async () => {
    await upstream.setFaults({ mode: "error", status: 500 })
    try {
      const { events, error } = await call(ask("say exactly: never"))
      expect(events).toEqual([])
      expect(error).toMatchObject({ status: 502, type: "api_error", retryable: true })
    } finally {
      await upstream.setFaults({ mode: "none" })
    }
  })

  it("a wrong upstream key is the gateway's problem: a retryable 502, not a client 401", async () => {
    const { error } = await call(ask("say exactly: hi"), placementFor(upstream.baseUrl, "sk-wrong"))
    expect(error).toMatchObject({ status: 502, retryable: true })
    expect(error!.message).toContain("HTTP 401")
  })

  it("a base URL that already ends in /v1 works too", async () => {
    const { error, events } = await call(ask("say exactly: versioned"), placementFor(`${upstream.baseUrl}/v1/`))
    expect(error).toBeUndefined()
    expect(collect(events).content).toEqual([{ type: "text", text: "versioned" }])
  })

  it("a closed port is a retryable 502 connection error", async () => {
    const { error } = await call(ask("say exactly: hi"), placementFor("http://127.0.0.1:1"))
    expect(error).toMatchObject({ status: 502, type: "api_error", retryable: true })
    expect(error!.message).toMatch(/Could not reach the upstream/)
  })
})

describe("Anthropic backend, non-streamed (complete), against the simulate upstream", () => {
  let upstream: SimulateUpstream
  const whole = makeAnthropicBackend()
  beforeAll(async () => {
    upstream = await startInProcessSimulateUpstream(UPSTREAM_KEY)
  })
  afterAll(async () => {
    await whole.close()
    await upstream?.stop()
  })
  const complete = (request: ReturnType<typeof ask>) => Effect.runPromise(whole.complete!(request, placementFor(upstream.baseUrl)))
  const streamed = async (request: ReturnType<typeof ask>) => collect((await runAll(whole.stream(request, placementFor(upstream.baseUrl)))).events)

  it("gives the same answer a stream gives: text, a tool call, a signed thinking block", async () => {
    const tools = [{ name: "get_weather", inputSchema: { type: "object", properties: { city: { type: "string" } }, required: ["city"] } }]
    for (const request of [
      ask("say exactly: hello from upstream"),
      ask("Use get_weather for Oslo", { tools }),
      ask("say exactly: thought through", { reasoning: { enabled: true, visible: true, budgetTokens: 1024 } })
    ]) {
      const response = await complete(request)
      const reference = await streamed(request)
      expect(response.content).toEqual(reference.content)
      expect(response.stopReason).toBe(reference.stopReason)
      expect(response.usage).toEqual(reference.usage)
      expect(response.model).toBe("svc-atlas-1")
      expect(JSON.stringify(response)).not.toContain(SECRET_MODEL)
    }
  })
})
