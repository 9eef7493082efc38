/**
 * The OpenAI-compatible backend over real HTTP against a fake upstream (node:http): what it sends,
 * what it makes of the answer, keep-alive reuse, and every way the upstream can fail.
 */
import { Cause, Effect, Exit, Stream } from "effect"
import { createServer } from "node:net"
import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from "vitest"
import type { BackendError, PlacementRuntime } from "../../../src/backends/backend.ts"
import { makeOpenAICompatibleBackend } from "../../../src/backends/openai-compatible/index.ts"
import { makeSimulatorBackend, simulatorPlacement } from "../../../src/backends/simulator/simulator.ts"
import { assistantMessage, userMessage } from "../../../src/model/content.ts"
import { eventOrderViolation } from "../../../src/model/event-order.ts"
import type { CanonicalEvent } from "../../../src/model/events.ts"
import { collect } from "../../../src/model/events.ts"
import type { CanonicalRequest } from "../../../src/model/request.ts"
import { makeRequest } from "../../../src/model/request.ts"
import { countTextTokensExact } from "../../../src/model/bpe.ts"
import { countRequestTokens } from "../../../src/model/tokens.ts"
import { makeUsage } from "../../../src/model/usage.ts"
import { writeEndlessEvent, writeEndlessLine, writeHugeJson } from "../../support/hostile-upstream.ts"
import { type FakeUpstream, openAiLike, sse, startFakeUpstream, upstreamChunk } from "./fake-upstream.ts"

const backend = makeOpenAICompatibleBackend()
let upstream: FakeUpstream
beforeAll(async () => {
  upstream = await startFakeUpstream()
})
afterAll(async () => {
  await backend.close()
  await upstream.close()
})
beforeEach(() => {
  upstream.handler = openAiLike
  upstream.received.length = 0
})

const placementFor = (baseUrl: string): PlacementRuntime => ({
  id: "up-a",
  modelId: "svc-up",
  upstreamModel: "up-model-x",
  reasoning: false,
  upstream: { baseUrl, apiKey: "sk-test" },
  faults: { mode: "none" }
})
const placement = () => placementFor(`${upstream.url}/v1`)
const ask = (text: string, init: Partial<CanonicalRequest> = {}) => makeRequest({ model: "svc-up", messages: [userMessage(text)], ...init })

const run = (request: CanonicalRequest, at = placement()) => Effect.runPromise(Stream.runCollect(backend.stream(request, at)))

/** The events that arrived before the stream failed, and the failure. */
const runToFailure = async (request: CanonicalRequest, at = placement()) => {
  const events: Array<CanonicalEvent> = []
  const exit = await Effect.runPromiseExit(Stream.runForEach(backend.stream(request, at), (e) => Effect.sync(() => events.push(e))))
  if (!Exit.isFailure(exit)) throw new Error("expected the stream to fail")
  const error = Cause.findErrorOption(exit.cause)
  if (error._tag !== "Some") throw new Error(`expected a BackendError, got ${Cause.pretty(exit.cause)}`)
  return { events, error: error.value as BackendError }
}

describe("openai-compatible backend", () => {
  it("streams text with the catalog model name, and sends what an OpenAI upstream expects", async () => {
    const events = await run(ask("say exactly: hello upstream"))
    expect(eventOrderViolation(events)).toBeUndefined()
    expect(events[0]).toEqual({ type: "message_start", model: "svc-up" })
    expect(collect(events).content).toEqual([{ type: "text", text: "hello upstream" }])
    expect(JSON.stringify(events)).not.toContain("up-model-x")
    const [sent] = upstream.received
    expect(sent.path).toBe("/v1/chat/completions")
    expect(sent.headers.authorization).toBe("Bearer sk-test")
    expect(sent.body).toMatchObject({ model: "up-model-x", stream: true, stream_options: { include_usage: true } })
  })

  it("gives the same answer and usage the simulator gives directly (the request survives the trip)", async () => {
    const request = ask("Write a few words about boats.", { temperature: 0.7, seed: 9, maxOutputTokens: 40, stopSequences: ["zebra"] })
    const viaHttp = collect(await run(request))
    const direct = collect(await Effect.runPromise(Stream.runCollect(
      makeSimulatorBackend().stream({ ...request, model: "up-model-x" }, simulatorPlacement({ modelId: "up-model-x" }))
    )))
    expect(viaHttp.content).toEqual(direct.content)
    expect(viaHttp.usage).toEqual(direct.usage)
    expect(viaHttp.usage.outputTokens).toBeGreaterThan(0)
  })

  it("streams tool calls as tool_use blocks", async () => {
    const tools = [{ name: "get_weather", inputSchema: { type: "object", properties: { city: { type: "string" } }, required: ["city"] } }]
    const response = collect(await run(ask("weather?", { tools, toolChoice: { type: "tool", name: "get_weather" } })))
    expect(response.stopReason).toBe("tool_use")
    const [call] = response.content
    expect(call).toMatchObject({ type: "tool_use", name: "get_weather" })
    expect(call.type === "tool_use" && typeof (call.input as { city: unknown }).city).toBe("string")
  })

  it("reuses keep-alive connections across calls, and adds /v1 to a bare base URL", async () => {
    for (const word of ["one", "two", "three", "four", "five", "six"]) await run(ask(`say exactly: ${word}`), placementFor(upstream.url))
    expect(new Set(upstream.received.map((r) => r.path))).toEqual(new Set(["/v1/chat/completions"]))
    // undici may open a second socket when a call starts before the previous one is marked free.
    expect(new Set(upstream.received.map((r) => r.connection)).size).toBeLessThanOrEqual(2)
  })

  it("turns a 429 with retry-after into a retryable rate limit, without the upstream model name", async () => {
    upstream.handler = (_req, res) => {
      res.writeHead(429, { "content-type": "application/json", "retry-after": "7" })
      res.end(JSON.stringify({ error: { message: "Rate limit reached for up-model-x", type: "requests", code: "rate_limit_exceeded" } }))
    }
    const { events, error } = await runToFailure(ask("hi"))
    expect(events).toEqual([])
    expect(error).toMatchObject({ _tag: "BackendError", status: 429, type: "rate_limit_error", retryable: true, retryAfterSeconds: 7 })
    expect(error.message).toBe("Rate limit reached for svc-up")
  })

  it("turns a 400 into a non-retryable invalid request with the upstream's message", async () => {
    upstream.handler = (_req, res) => {
      res.writeHead(400, { "content-type": "application/json" })
      res.end(JSON.stringify({ error: { message: "Invalid value for 'temperature'", type: "invalid_request_error", param: "temperature" } }))
    }
    const { error } = await runToFailure(ask("hi"))
    expect(error).toMatchObject({ status: 400, type: "invalid_request_error", retryable: false, message: "Invalid value for 'temperature'" })
  })

  it("treats a refused credential as the gateway's problem: retryable 502, not the client's 4xx", async () => {
    upstream.handler = (_req, res) => {
      res.writeHead(401, { "content-type": "application/json" })
      res.end(JSON.stringify({ error: { message: "Incorrect API key provided" } }))
    }
    const { error } = await runToFailure(ask("hi"))
    expect(error).toMatchObject({ status: 502, type: "api_error", retryable: true })
  })

  it("estimates usage with the exact token counts when the upstream reports none", async () => {
    upstream.handler = (_req, res) => {
      res.writeHead(200, { "content-type": "text/event-stream" })
      res.end(sse(upstreamChunk({ role: "assistant", content: "" }), upstreamChunk({ content: "Bonjour, " }), upstreamChunk({ content: "le monde." }, "stop"), "[DONE]"))
    }
    const request = ask("Say hello in French, please.")
    const events = await run(request)
    expect(collect(events).usage).toEqual(makeUsage({
      inputTokens: await Effect.runPromise(countRequestTokens(request)),
      outputTokens: countTextTokensExact("Bonjour, le monde.")
    }))
  })

  it("charges at most the text's UTF-8 size, never zero, when the upstream promised usage (usage: null) and sent none", async () => {
    const promised = (chunk: Record<string, unknown>) => ({ ...chunk, usage: null })
    upstream.handler = (_req, res) => {
      res.writeHead(200, { "content-type": "text/event-stream" })
      res.end(sse(promised(upstreamChunk({ role: "assistant", content: "" })), promised(upstreamChunk({ content: "Bonjour, " })), promised(upstreamChunk({ content: "le monde." }, "stop")), "[DONE]"))
    }
    const request = ask("Say hello in French, please.")
    const usage = collect(await run(request)).usage
    expect(usage).toEqual(makeUsage({ inputTokens: await Effect.runPromise(countRequestTokens(request)), outputTokens: Buffer.byteLength("Bonjour, le monde.") }))
    expect(usage.outputTokens).toBeGreaterThanOrEqual(countTextTokensExact("Bonjour, le monde."))
  })

  it("fails the stream on a mid-stream error chunk, after the events already sent", async () => {
    upstream.handler = (_req, res) => {
      res.writeHead(200, { "content-type": "text/event-stream" })
      res.end(sse(upstreamChunk({ role: "assistant", content: "" }), upstreamChunk({ content: "Partial" }), { error: { message: "The server had an error", type: "server_error" } }))
    }
    const { events, error } = await runToFailure(ask("hi"))
    expect(events.map((e) => e.type)).toEqual(["message_start", "block_start", "text_delta"])
    expect(error).toMatchObject({ status: 502, type: "api_error", retryable: true, message: "The server had an error" })
  })

  it("fails the stream, after the events already sent, when the upstream sends a line that never ends", async () => {
    upstream.handler = async (_req, res) => {
      await writeEndlessLine(res, sse(upstreamChunk({ role: "assistant", content: "" }), upstreamChunk({ content: "Partial" })) + "data: ")
    }
    const { events, error } = await runToFailure(ask("hi"))
    expect(events.map((e) => e.type)).toEqual(["message_start", "block_start", "text_delta"])
    expect(error).toMatchObject({ status: 502, type: "api_error", retryable: true })
    expect(error.message).toContain("Server-Sent Events line longer than")
  })

  it("fails the stream, after the events already sent, when the upstream sends data lines that never end their event", async () => {
    upstream.handler = async (_req, res) => {
      await writeEndlessEvent(res, sse(upstreamChunk({ role: "assistant", content: "" }), upstreamChunk({ content: "Partial" })))
    }
    const { events, error } = await runToFailure(ask("hi"))
    expect(events.map((e) => e.type)).toEqual(["message_start", "block_start", "text_delta"])
    expect(error).toMatchObject({ status: 502, type: "api_error", retryable: true })
    expect(error.message).toContain("Server-Sent Events event with more than")
  })

  it("fails retryably when the body ends before the answer is complete, or the upstream is unreachable", async () => {
    upstream.handler = (_req, res) => {
      res.writeHead(200, { "content-type": "text/event-stream" })
      res.end(sse(upstreamChunk({ content: "cut" })))
    }
    expect((await runToFailure(ask("hi"))).error).toMatchObject({ status: 502, retryable: true })
    const closed = createServer()
    await new Promise<void>((resolve) => closed.listen(0, "127.0.0.1", resolve))
    const port = (closed.address() as { port: number }).port
    await new Promise<void>((resolve) => closed.close(() => resolve()))
    const { error } = await runToFailure(ask("hi"), placementFor(`http://127.0.0.1:${port}/v1`))
    expect(error).toMatchObject({ status: 502, type: "api_error", retryable: true })
    expect(error.message).not.toContain("127.0.0.1")
  })

  it("releases the upstream response when the consumer stops early", async () => {
    let closedByClient: () => void = () => {}
    const closed = new Promise<void>((resolve) => (closedByClient = resolve))
    upstream.handler = (_req, res) => {
      res.writeHead(200, { "content-type": "text/event-stream" })
      res.write(sse(upstreamChunk({ role: "assistant", content: "" }), upstreamChunk({ content: "first" })))
      res.on("close", () => closedByClient()) // never ends on its own
    }
    const events = await Effect.runPromise(Stream.runCollect(Stream.take(backend.stream(ask("hi"), placement()), 2)))
    expect(events.map((e) => e.type)).toEqual(["message_start", "block_start"])
    await closed
  })

  it("answers a document URL with a non-retryable 400 before calling the upstream", async () => {
    const request = makeRequest({ model: "svc-up", messages: [userMessage([{ type: "document", source: { kind: "url", url: "https://x/a.pdf" } }])] })
    const { error } = await runToFailure(request)
    expect(error).toMatchObject({ status: 400, retryable: false })
    expect(upstream.received).toEqual([])
  })
})

describe("openai-compatible backend, non-streamed (complete)", () => {
  const complete = (request: CanonicalRequest, at = placement()) => Effect.runPromise(backend.complete!(request, at))
  const completeExit = (request: CanonicalRequest, at = placement()) => Effect.runPromiseExit(backend.complete!(request, at))
  const failureOf = (exit: Exit.Exit<unknown, BackendError>) => {
    if (!Exit.isFailure(exit)) throw new Error("expected a failure")
    const error = Cause.findErrorOption(exit.cause)
    if (error._tag !== "Some") throw new Error(`expected a BackendError, got ${Cause.pretty(exit.cause)}`)
    return error.value
  }

  it("calls the upstream without streaming and gives the same answer and usage a stream gives", async () => {
    const request = ask("Write a few words about boats.", { temperature: 0.7, seed: 9, maxOutputTokens: 40 })
    const whole = await complete(request)
    const [sent] = upstream.received
    expect(sent.body).toMatchObject({ model: "up-model-x", stream: false })
    expect(sent.body.stream_options).toBeUndefined()
    expect(sent.headers.accept).toBe("application/json")
    const streamed = collect(await run(request))
    expect(whole.content).toEqual(streamed.content)
    expect(whole.usage).toEqual(streamed.usage)
    expect(whole.stopReason).toBe(streamed.stopReason)
    expect(whole.model).toBe("svc-up")
    expect(JSON.stringify(whole)).not.toContain("up-model-x")
  })

  it("sends a large prompt as chunks with its content-length, which the upstream reads as the same JSON", async () => {
    upstream.handler = (_req, res) => {
      res.writeHead(200, { "content-type": "application/json" })
      res.end(JSON.stringify({ id: "c", object: "chat.completion", created: 1, model: "x", choices: [{ index: 0, message: { role: "assistant", content: "ok" }, finish_reason: "stop" }] }))
    }
    const prompt = "a long prompt with emoji 😀 and \"quotes\"\n".repeat(80_000) // 3.4 MiB
    const whole = await complete(ask(prompt))
    expect(whole.content).toEqual([{ type: "text", text: "ok" }])
    const [sent] = upstream.received
    expect(sent.headers["transfer-encoding"]).toBeUndefined()
    expect(Number(sent.headers["content-length"])).toBe(Buffer.byteLength(JSON.stringify(sent.body)))
    expect(sent.body.messages).toEqual([{ role: "user", content: prompt }])
  })

  it("sends a large tool call's input as its exact JSON text, made in slices", async () => {
    upstream.handler = (_req, res) => {
      res.writeHead(200, { "content-type": "application/json" })
      res.end(JSON.stringify({ id: "c", object: "chat.completion", created: 1, model: "x", choices: [{ index: 0, message: { role: "assistant", content: "ok" }, finish_reason: "stop" }] }))
    }
    // ~9 Mi characters of two-byte strings: JSON.stringify of it at once held the loop 240–390 ms on a slow VM.
    const input = { rows: Array.from({ length: 9_000 }, (_, i) => `${i} é 😀 "q" ${"z".repeat(1_000)}`) }
    const small = { city: "Paris" }
    const request = makeRequest({
      model: "svc-up",
      messages: [
        userMessage("go"),
        { role: "assistant", content: [{ type: "tool_use", id: "call_big", name: "f", input }, { type: "tool_use", id: "call_small", name: "g", input: small }] },
        { role: "user", content: [{ type: "tool_result", toolUseId: "call_big", content: "done", isError: false }, { type: "tool_result", toolUseId: "call_small", content: "sunny", isError: false }] }
      ]
    })
    // Never made whole in one call (what holds the loop): watched on JSON.stringify itself.
    const stringify = vi.spyOn(JSON, "stringify")
    let wholeInputs = 0
    const whole = await complete(request).finally(() => {
      wholeInputs = stringify.mock.calls.filter(([value]) => value === input).length
      stringify.mockRestore()
    })
    expect(wholeInputs).toBe(0)
    expect(whole.content).toEqual([{ type: "text", text: "ok" }])
    const calls = upstream.received[0]!.body.messages[1].tool_calls
    expect(calls.map((call: { function: { arguments: string } }) => call.function.arguments)).toEqual([JSON.stringify(input), JSON.stringify(small)])
  })

  it("sends a request of 20,000 messages whole and in order; a document by URL at its end is a 400; a bad base URL a 500", async () => {
    upstream.handler = (_req, res) => {
      res.writeHead(200, { "content-type": "application/json" })
      res.end(JSON.stringify({ id: "c", object: "chat.completion", created: 1, model: "x", choices: [{ index: 0, message: { role: "assistant", content: "ok" }, finish_reason: "stop" }] }))
    }
    const messages = Array.from({ length: 20_000 }, (_, i) => (i % 2 === 0 ? userMessage(`q${i}`) : assistantMessage(`a${i}`)))
    const whole = await complete(makeRequest({ model: "svc-up", messages }))
    expect(whole.content).toEqual([{ type: "text", text: "ok" }])
    expect(upstream.received[0]!.body.messages.map((m: { content: string }) => m.content)).toEqual(messages.map((_, i) => (i % 2 === 0 ? `q${i}` : `a${i}`)))
    const byUrl = userMessage([{ type: "document", source: { kind: "url", url: "https://example.com/a.pdf" } }])
    const refused = failureOf(await completeExit(makeRequest({ model: "svc-up", messages: [...messages, byUrl] })))
    expect(refused).toMatchObject({ status: 400, retryable: false })
    expect(refused.message).toContain("documents by URL")
    expect(failureOf(await completeExit(ask("hi"), placementFor("not a url")))).toMatchObject({ status: 500, retryable: false })
    expect(upstream.received).toHaveLength(1)
  })

  it("turns tool calls, reasoning and a length stop into canonical blocks", async () => {
    upstream.handler = (_req, res) => {
      res.writeHead(200, { "content-type": "application/json" })
      res.end(JSON.stringify({
        id: "chatcmpl-x",
        object: "chat.completion",
        model: "up-model-x",
        choices: [{
          index: 0,
          message: {
            role: "assistant",
            content: "Let me look.",
            reasoning_content: "The user wants weather.",
            tool_calls: [
              { id: "call_a", type: "function", function: { name: "get_weather", arguments: "{\"city\":\"Oslo\"}" } },
              { id: "call_b", type: "function", function: { name: "get_time", arguments: "{}" } }
            ]
          },
          finish_reason: "tool_calls"
        }],
        usage: { prompt_tokens: 11, completion_tokens: 22, completion_tokens_details: { reasoning_tokens: 5 } }
      }))
    }
    const response = await complete(ask("weather?", { reasoning: { enabled: true, visible: true } }))
    expect(response.content).toEqual([
      { type: "thinking", thinking: "The user wants weather.", signature: "" },
      { type: "text", text: "Let me look." },
      { type: "tool_use", id: "call_a", name: "get_weather", input: { city: "Oslo" } },
      { type: "tool_use", id: "call_b", name: "get_time", input: {} }
    ])
    expect(response.stopReason).toBe("tool_use")
    expect(response.usage).toMatchObject({ inputTokens: 11, outputTokens: 22, reasoningTokens: 5 })

    upstream.handler = (_req, res) => {
      res.writeHead(200, { "content-type": "application/json" })
      res.end(JSON.stringify({ choices: [{ index: 0, message: { role: "assistant", content: "cut" }, finish_reason: "length" }] }))
    }
    const cut = await complete(ask("long"))
    expect(cut.stopReason).toBe("max_tokens")
    expect(cut.usage.outputTokens).toBeGreaterThan(0) // no usage sent: estimated, never zero
  })

  it("maps upstream failures like the stream does: 429 with retry-after, 400, a 200 error body, a body that is not JSON", async () => {
    upstream.handler = (_req, res) => {
      res.writeHead(429, { "content-type": "application/json", "retry-after": "7" })
      res.end(JSON.stringify({ error: { message: "Rate limit reached for up-model-x" } }))
    }
    expect(failureOf(await completeExit(ask("hi")))).toMatchObject({ status: 429, retryable: true, retryAfterSeconds: 7, message: "Rate limit reached for svc-up" })
    upstream.handler = (_req, res) => {
      res.writeHead(400, { "content-type": "application/json" })
      res.end(JSON.stringify({ error: { message: "Invalid value for 'temperature'" } }))
    }
    expect(failureOf(await completeExit(ask("hi")))).toMatchObject({ status: 400, retryable: false })
    upstream.handler = (_req, res) => {
      res.writeHead(200, { "content-type": "application/json" })
      res.end(JSON.stringify({ error: { message: "overloaded", type: "server_error" } }))
    }
    expect(failureOf(await completeExit(ask("hi")))).toMatchObject({ status: 502, retryable: true })
    upstream.handler = (_req, res) => {
      res.writeHead(200, { "content-type": "application/json" })
      res.end("<html>proxy error</html>")
    }
    expect(failureOf(await completeExit(ask("hi")))).toMatchObject({ status: 502, retryable: true })
  })

  it("stops reading an answer past its size limit: a retryable 502 that says so", async () => {
    upstream.handler = (_req, res) => writeHugeJson(res)
    const error = failureOf(await completeExit(ask("hi")))
    expect(error).toMatchObject({ status: 502, type: "api_error", retryable: true })
    expect(error.message).toContain("larger than")
  })
})

describe("openai-compatible backend, non-streamed, against an upstream that streams anyway", () => {
  it("decodes the event stream it got into the same answer", async () => {
    upstream.handler = (_req, res) => {
      res.writeHead(200, { "content-type": "text/event-stream" })
      res.end(sse(
        upstreamChunk({ role: "assistant", content: "Hello" }),
        upstreamChunk({ content: " there" }, "stop"),
        { ...upstreamChunk({}), choices: [], usage: { prompt_tokens: 5, completion_tokens: 2 } },
        "[DONE]"
      ))
    }
    const response = await Effect.runPromise(backend.complete!(ask("hi"), placement()))
    expect(upstream.received.at(-1)!.body.stream).toBe(false)
    expect(response).toMatchObject({ content: [{ type: "text", text: "Hello there" }], stopReason: "end_turn", usage: { inputTokens: 5, outputTokens: 2 } })
  })

  it("decodes a long one (in pieces: decodeWhole) into the whole answer", async () => {
    // ~3 MB of small events, read in many chunks.
    const pieces = Array.from({ length: 20_000 }, (_, i) => upstreamChunk({ content: `w${i % 10} ` }))
    upstream.handler = (_req, res) => {
      res.writeHead(200, { "content-type": "text/event-stream" })
      res.end(sse(upstreamChunk({ role: "assistant", content: "" }), ...pieces, upstreamChunk({}, "stop"), { ...upstreamChunk({}), choices: [], usage: { prompt_tokens: 5, completion_tokens: 20_000 } }, "[DONE]"))
    }
    const response = await Effect.runPromise(backend.complete!(ask("hi"), placement()))
    const text = Array.from({ length: 20_000 }, (_, i) => `w${i % 10} `).join("")
    expect(response).toMatchObject({ content: [{ type: "text", text }], usage: { outputTokens: 20_000 } })
  })

  it("fails as the stream would when the event stream breaks its protocol", async () => {
    upstream.handler = (_req, res) => {
      res.writeHead(200, { "content-type": "text/event-stream" })
      res.end(sse(upstreamChunk({ role: "assistant", content: "Hello" })))
    }
    const failed = await Effect.runPromise(Effect.flip(backend.complete!(ask("hi"), placement())))
    expect(failed).toMatchObject({ status: 502, message: expect.stringContaining("ended before the answer was complete") })
  })
})
