/**
 * Upstream SSE → canonical events: the SSE decoder, and the chunk parser against what the gateway's
 * own chat encoder writes (encoder SSE → parser gives back the same events) and against the odd
 * things real compatible servers send.
 */
import { Effect, Stream } from "effect"
import { describe, expect, it } from "vitest"
import { BackendError } from "../../../src/backends/backend.ts"
import { completionAsChunk, makeChunkParser, MAX_UNNAMED_ARGS_CHARS, MAX_UNNAMED_CALLS } from "../../../src/backends/openai-compatible/chunk-parser.ts"
import { ssePayloads } from "../../../src/backends/upstream/sse.ts"
import { MAX_ANSWER_BLOCKS, MAX_EVENT_VALUES, MAX_TOOL_INPUT_CHARS } from "../../../src/backends/upstream/upstream.ts"
import { makeSimulatorBackend, simulatorPlacement } from "../../../src/backends/simulator/simulator.ts"
import { chatDialect } from "../../../src/dialects/chat/index.ts"
import { userMessage } from "../../../src/model/content.ts"
import { eventOrderViolation } from "../../../src/model/event-order.ts"
import type { CanonicalEvent } from "../../../src/model/events.ts"
import { makeRequest } from "../../../src/model/request.ts"
import { MAX_REPORTED_TOKENS } from "../../../src/model/usage.ts"
import { contextFor } from "../../dialects/chat/support.ts"
import { sse, upstreamChunk } from "./fake-upstream.ts"

const parserOptions = { modelId: "svc-up", visibleReasoning: false }

/** Runs SSE text through decoder and parser, fed in pieces of `step` characters. */
const parse = (text: string, step = text.length, options = parserOptions): Array<CanonicalEvent> => {
  const decoder = ssePayloads()
  const parser = makeChunkParser(options)
  const events: Array<CanonicalEvent> = []
  for (let at = 0; at < text.length; at += step) events.push(...decoder.feed(text.slice(at, at + step)).flatMap((data) => parser.push(data)))
  events.push(...decoder.end().flatMap((data) => parser.push(data)), ...parser.end())
  return events
}

const failure = (run: () => unknown): BackendError => {
  try {
    run()
  } catch (error) {
    if (error instanceof BackendError) return error
    throw error
  }
  throw new Error("expected a BackendError")
}

/** What a client of the chat dialect can see of a turn: no thinking, blocks renumbered, no start usage. */
const visibleToChat = (events: ReadonlyArray<CanonicalEvent>): Array<CanonicalEvent> => {
  const thinking = new Set(events.flatMap((e) => (e.type === "block_start" && e.block.type === "thinking" ? [e.index] : [])))
  const renumber = (index: number) => index - [...thinking].filter((t) => t < index).length
  return events.flatMap((event): Array<CanonicalEvent> => {
    if (event.type === "message_start") return [{ type: "message_start", model: event.model }]
    if (!("index" in event)) return [event]
    if (thinking.has(event.index)) return []
    return [{ ...event, index: renumber(event.index) } as CanonicalEvent]
  })
}

describe("SSE payloads (the OpenAI-compatible reader)", () => {
  it("splits events on blank lines at any chunk boundary, skipping comments and other fields", () => {
    const text = ": keepalive\n\nevent: x\ndata: {\"a\":1}\r\n\r\ndata: line one\ndata: line two\n\ndata: 1\ndata: 2\ndata: 3\n\nid: 7\ndata:[DONE]"
    for (const step of [1, 2, 5, text.length]) {
      const decoder = ssePayloads()
      const out: Array<string> = []
      for (let at = 0; at < text.length; at += step) out.push(...decoder.feed(text.slice(at, at + step)))
      out.push(...decoder.end())
      expect(out, `step ${step}`).toEqual(["{\"a\":1}", "line one\nline two", "1\n2\n3", "[DONE]"])
    }
  })

  it("reads data fields as the SSE spec does: one optional space after the colon, a bare `data`, CRLF, unknown fields skipped", () => {
    const text = "data\n\ndata:\r\n\ndata:  two spaces\n\ndataX: not data\ndata:x\r\ndata: y\n\ndata: last without a blank line"
    for (const step of [1, 3, text.length]) {
      const decoder = ssePayloads()
      const out: Array<string> = []
      for (let at = 0; at < text.length; at += step) out.push(...decoder.feed(text.slice(at, at + step)))
      out.push(...decoder.end())
      expect(out, `step ${step}`).toEqual(["", "", " two spaces", "x\ny", "last without a blank line"])
    }
  })
})

describe("chunk parser", () => {
  const simulate = async (text: string, tools = false, visible = false) => {
    const request = makeRequest({
      model: "svc-up",
      messages: [userMessage(text)],
      reasoning: { enabled: true, visible },
      ...(tools ? { tools: [{ name: "get_weather", inputSchema: { type: "object", properties: { city: { type: "string" } }, required: ["city"] } }, { name: "get_time", inputSchema: { type: "object", properties: {} } }] } : {})
    })
    const placement = simulatorPlacement({ modelId: "svc-up", reasoning: true })
    return Effect.runPromise(Stream.runCollect(makeSimulatorBackend().stream(request, placement)))
  }
  const encode = (events: ReadonlyArray<CanonicalEvent>) => {
    const encoder = chatDialect.streamEncoder(contextFor({ includeUsage: true }))
    return events.map((event) => encoder.event(event)).join("")
  }

  it("gives back the events the chat encoder was fed, at any chunk boundary (text, hidden reasoning)", async () => {
    const events = await simulate("Tell me about rivers and lakes.", false, true)
    for (const step of [3, 64, 100_000]) {
      const parsed = parse(encode(events), step)
      expect(eventOrderViolation(parsed)).toBeUndefined()
      expect(parsed).toEqual(visibleToChat(events))
    }
  })

  it("gives back parallel tool calls as separate blocks with the same ids and arguments", async () => {
    const events = await simulate("use get_weather and get_time", true)
    const parsed = parse(encode(events), 17)
    expect(parsed.filter((e) => e.type === "block_start").map((e) => e.type === "block_start" && e.block.type)).toEqual(["tool_use", "tool_use"])
    expect(parsed).toEqual(visibleToChat(events))
  })

  it("never reports the upstream's model name", () => {
    const parsed = parse(sse(upstreamChunk({ role: "assistant", content: "" }), upstreamChunk({ content: "hi" }), upstreamChunk({}, "stop"), "[DONE]"))
    expect(parsed[0]).toEqual({ type: "message_start", model: "svc-up" })
    expect(JSON.stringify(parsed)).not.toContain("secret-upstream-model")
  })

  it("closes the text block before a tool call, opens a new one for text after it, holds a call until its name", () => {
    const parsed = parse(sse(
      upstreamChunk({ content: "Checking." }),
      upstreamChunk({ tool_calls: [{ index: 0, id: "call_x", function: { arguments: "{\"ci" } }] }),
      upstreamChunk({ tool_calls: [{ index: 0, function: { name: "get_weather", arguments: "ty\":1}" } }] }),
      upstreamChunk({ content: "Done." }),
      upstreamChunk({}, "stop"),
      "[DONE]"
    ))
    expect(eventOrderViolation(parsed)).toBeUndefined()
    expect(parsed.slice(1, -1)).toEqual([
      { type: "block_start", index: 0, block: { type: "text" } },
      { type: "text_delta", index: 0, text: "Checking." },
      { type: "block_stop", index: 0 },
      { type: "block_start", index: 1, block: { type: "tool_use", id: "call_x", name: "get_weather" } },
      { type: "tool_input_delta", index: 1, partialJson: "{\"city\":1}" },
      { type: "block_stop", index: 1 },
      { type: "block_start", index: 2, block: { type: "text" } },
      { type: "text_delta", index: 2, text: "Done." },
      { type: "block_stop", index: 2 }
    ])
    // "stop" on a turn with tool calls (some servers do this) is still a tool_use stop.
    expect(parsed.at(-1)).toMatchObject({ type: "message_stop", stopReason: "tool_use" })
  })

  it("fails when an upstream interleaves the fragments of two calls", () => {
    const error = failure(() => parse(sse(
      upstreamChunk({ tool_calls: [{ index: 0, id: "a", function: { name: "f", arguments: "{" } }] }),
      upstreamChunk({ tool_calls: [{ index: 1, id: "b", function: { name: "g", arguments: "{" } }] }),
      upstreamChunk({ tool_calls: [{ index: 0, function: { arguments: "}" } }] })
    )))
    expect(error).toMatchObject({ status: 502, retryable: true })
  })

  it("holds calls without a name only so far: their number and their arguments are bounded", () => {
    const fragment = (index: number, args: string) => JSON.stringify(upstreamChunk({ tool_calls: [{ index, function: { arguments: args } }] }))
    // Arguments that never get their name: once past the bound, the stream fails.
    const parser = makeChunkParser(parserOptions)
    const piece = "x".repeat(64 * 1024)
    let pushed = 0
    const tooMuch = failure(() => {
      for (; pushed < 1_000; pushed++) parser.push(fragment(0, piece))
    })
    expect(pushed).toBe(MAX_UNNAMED_ARGS_CHARS / piece.length)
    expect(tooMuch).toMatchObject({ status: 502, retryable: true, message: expect.stringContaining("without the call's name") })
    // Calls that never get their names.
    const many = makeChunkParser(parserOptions)
    let started = 0
    const tooMany = failure(() => {
      for (; started < 10_000; started++) many.push(fragment(started, ""))
    })
    expect(started).toBe(MAX_UNNAMED_CALLS)
    expect(tooMany.message).toContain(`more than ${MAX_UNNAMED_CALLS} tool calls without their names`)
    // Named, they no longer count: as many calls as that, each named at once, are fine.
    const named = makeChunkParser(parserOptions)
    const events: Array<CanonicalEvent> = []
    for (let i = 0; i <= MAX_UNNAMED_CALLS; i++) {
      named.push(fragment(i, "{\"a\":"), events)
      named.push(JSON.stringify(upstreamChunk({ tool_calls: [{ index: i, function: { name: "f", arguments: "1}" } }] })), events)
    }
    expect(events.filter((e) => e.type === "block_start")).toHaveLength(MAX_UNNAMED_CALLS + 1)
    // A call named in the fragment that carries its arguments (as a whole answer's is) is open at
    // once, whatever their length.
    const long = `{"v":"${"x".repeat(MAX_UNNAMED_ARGS_CHARS)}"}`
    const whole = makeChunkParser(parserOptions).pushChunk(completionAsChunk({
      choices: [{ index: 0, message: { role: "assistant", tool_calls: [{ id: "call_1", type: "function", function: { name: "f", arguments: long } }] }, finish_reason: "tool_calls" }]
    }))
    expect(whole.find((e) => e.type === "block_start")).toMatchObject({ block: { type: "tool_use", name: "f" } })
    expect(whole.filter((e) => e.type === "tool_input_delta").map((e) => e.type === "tool_input_delta" ? e.partialJson : "").join("")).toBe(long)
  })

  it("takes at most MAX_ANSWER_BLOCKS blocks and MAX_TOOL_INPUT_CHARS of a call's arguments, streamed or whole", () => {
    const completion = (toolCalls: ReadonlyArray<unknown>) => completionAsChunk({
      choices: [{ index: 0, message: { role: "assistant", content: "hi", tool_calls: toolCalls }, finish_reason: "tool_calls" }]
    })
    const calls = (n: number) => Array.from({ length: n }, (_, i) => ({ id: `c${i}`, type: "function", function: { name: "f", arguments: "{}" } }))
    // The text is one block: MAX_ANSWER_BLOCKS - 1 calls beside it fit, one more does not.
    const fits = makeChunkParser(parserOptions)
    expect(fits.end(fits.pushChunk(completion(calls(MAX_ANSWER_BLOCKS - 1)))).filter((e) => e.type === "block_start")).toHaveLength(MAX_ANSWER_BLOCKS)
    expect(failure(() => makeChunkParser(parserOptions).pushChunk(completion(calls(MAX_ANSWER_BLOCKS)))))
      .toMatchObject({ status: 502, message: `The upstream's answer has more than ${MAX_ANSWER_BLOCKS} content blocks` })
    // A million calls are not all copied first: only one past the limit is.
    expect((completion(calls(1_000_000)) as { choices: Array<{ delta: { tool_calls: Array<unknown> } }> }).choices[0]!.delta.tool_calls).toHaveLength(MAX_ANSWER_BLOCKS + 1)
    // Arguments: whole, at the limit and past it; streamed, past it over many fragments.
    const args = (n: number) => `{"v":"${"x".repeat(n - 8)}"}`
    expect(args(MAX_TOOL_INPUT_CHARS)).toHaveLength(MAX_TOOL_INPUT_CHARS)
    const whole = (text: string) => makeChunkParser(parserOptions).pushChunk(completion([{ id: "c", type: "function", function: { name: "f", arguments: text } }]))
    expect(whole(args(MAX_TOOL_INPUT_CHARS)).some((e) => e.type === "tool_input_delta")).toBe(true)
    const tooLong = { status: 502, message: `The upstream sent a tool call whose input is longer than ${MAX_TOOL_INPUT_CHARS} characters` }
    expect(failure(() => whole(args(MAX_TOOL_INPUT_CHARS + 1)))).toMatchObject(tooLong)
    const streamed = makeChunkParser(parserOptions)
    streamed.push(JSON.stringify(upstreamChunk({ tool_calls: [{ index: 0, id: "c", function: { name: "f", arguments: "" } }] })))
    const piece = "x".repeat(64 * 1024)
    let sent = 0
    expect(failure(() => {
      for (; sent < 1_000; sent++) streamed.push(JSON.stringify(upstreamChunk({ tool_calls: [{ index: 0, function: { arguments: piece } }] })))
    })).toMatchObject(tooLong)
    expect(sent).toBe(MAX_TOOL_INPUT_CHARS / piece.length)
  })

  it("refuses a streamed chunk of more values than any event holds, before parsing it; a long text passes", () => {
    const parser = makeChunkParser(parserOptions)
    parser.push(JSON.stringify(upstreamChunk({ role: "assistant", content: "" })))
    const logprobs = { content: new Array(40_000).fill({ token: "a", logprob: 0, bytes: [97], top_logprobs: [] }) }
    const heavy = JSON.stringify({ ...upstreamChunk({ content: "a" }), choices: [{ index: 0, delta: { content: "a" }, logprobs, finish_reason: null }] })
    expect(heavy.length).toBeGreaterThan(1 << 20)
    expect(failure(() => parser.push(heavy))).toMatchObject({ status: 502, message: `The upstream sent a stream event of more than ${MAX_EVENT_VALUES} JSON values` })
    const long = makeChunkParser(parserOptions)
    const text = "a, ".repeat(1 << 19)
    expect(long.push(JSON.stringify(upstreamChunk({ role: "assistant", content: text })))).toContainEqual({ type: "text_delta", index: 0, text })
  })

  it("surfaces reasoning_content as thinking only when visible reasoning was asked", () => {
    const text = sse(upstreamChunk({ reasoning_content: "hmm" }), upstreamChunk({ content: "ok" }), upstreamChunk({}, "stop"), "[DONE]")
    expect(parse(text).filter((e) => e.type === "block_start").length).toBe(1)
    const visible = parse(text, text.length, { ...parserOptions, visibleReasoning: true })
    expect(visible[1]).toEqual({ type: "block_start", index: 0, block: { type: "thinking" } })
    expect(visible[2]).toEqual({ type: "thinking_delta", index: 0, thinking: "hmm" })
  })

  it("maps finish reasons and takes usage from the usage chunk", () => {
    const stopOf = (finish: string) => parse(sse(upstreamChunk({ content: "x" }, finish), "[DONE]")).at(-1)
    expect(stopOf("length")).toMatchObject({ stopReason: "max_tokens" })
    expect(stopOf("content_filter")).toMatchObject({ stopReason: "refusal" })
    expect(stopOf("tool_calls")).toMatchObject({ stopReason: "tool_use" })
    expect(stopOf("stop")).toMatchObject({ stopReason: "end_turn" })
    const usage = { prompt_tokens: 50, completion_tokens: 9, total_tokens: 59, prompt_tokens_details: { cached_tokens: 20 }, completion_tokens_details: { reasoning_tokens: 4 } }
    const withUsage = parse(sse(upstreamChunk({ content: "x" }, "stop"), { ...upstreamChunk({}), choices: [], usage }, "[DONE]"))
    expect(withUsage.at(-1)).toEqual({ type: "message_stop", stopReason: "end_turn", usage: { inputTokens: 50, outputTokens: 9, cachedInputTokens: 20, reasoningTokens: 4 } })
  })

  it("takes a reported count only as a whole number from 0 to MAX_REPORTED_TOKENS (what else an upstream sends counts 0)", () => {
    const usageOf = (usage: unknown) => parse(sse(upstreamChunk({ content: "x" }, "stop"), { ...upstreamChunk({}), choices: [], usage }, "[DONE]")).at(-1)
    // An object where a count belongs was NaN, and a NaN count failed the answer's settlement (a 500).
    expect(usageOf({ prompt_tokens: {}, completion_tokens: "7", prompt_tokens_details: { cached_tokens: null }, completion_tokens_details: { reasoning_tokens: [] } }))
      .toMatchObject({ usage: { inputTokens: 0, outputTokens: 0, cachedInputTokens: 0, reasoningTokens: 0 } })
    // Negative (a credit), fractional (no bigint column takes it), past any call (1e300).
    expect(usageOf({ prompt_tokens: -5, completion_tokens: 2.5, prompt_tokens_details: { cached_tokens: 1e300 } }))
      .toMatchObject({ usage: { inputTokens: 0, outputTokens: 2, cachedInputTokens: MAX_REPORTED_TOKENS } })
  })

  it("leaves usage to estimate when the upstream sends none, and accepts a body that ends after finish_reason", () => {
    const parser = makeChunkParser(parserOptions)
    const parsed = [...parser.push(JSON.stringify(upstreamChunk({ content: "hello world" }, "stop"))), ...parser.end()]
    expect(parsed.at(-1)).toMatchObject({ type: "message_stop", usage: { inputTokens: 0, outputTokens: 0 } })
    expect(parser.unreported).toEqual({ generated: "hello world" })
    const reported = makeChunkParser(parserOptions)
    reported.push(JSON.stringify(upstreamChunk({ content: "x" }, "stop")))
    reported.push(JSON.stringify({ ...upstreamChunk({}), choices: [], usage: { prompt_tokens: 5, completion_tokens: 1 } }))
    reported.push("[DONE]")
    expect(reported.unreported).toBeUndefined()
  })

  it("keeps no text once the upstream shows it will report usage, and bounds the output by its UTF-8 size if it then sends none", () => {
    // OpenAI with include_usage: `usage: null` on every chunk before the usage chunk.
    const promised = (chunk: Record<string, unknown>) => ({ ...chunk, usage: null })
    const kept = makeChunkParser(parserOptions)
    kept.push(JSON.stringify(upstreamChunk({ content: "héllo " })))
    kept.push(JSON.stringify(promised(upstreamChunk({ content: "wörld" }))))
    kept.push(JSON.stringify(promised(upstreamChunk({}, "stop"))))
    kept.push("[DONE]")
    // Counted from the first chunk's text too, kept until the promise: "héllo wörld" is 13 bytes.
    expect(kept.unreported).toEqual({ atMostTokens: 13 })
    const tool = makeChunkParser(parserOptions)
    tool.push(JSON.stringify(promised(upstreamChunk({ tool_calls: [{ index: 0, id: "call_1", function: { name: "f", arguments: "{\"a\":1}" } }] }))))
    tool.push(JSON.stringify(promised(upstreamChunk({}, "tool_calls"))))
    expect(tool.end().at(-1)).toMatchObject({ type: "message_stop", stopReason: "tool_use" })
    expect(tool.unreported).toEqual({ atMostTokens: 7 })
    const kept2 = makeChunkParser(parserOptions)
    kept2.push(JSON.stringify(promised(upstreamChunk({ content: "x" }, "stop"))))
    kept2.push(JSON.stringify({ ...upstreamChunk({}), choices: [], usage: { prompt_tokens: 5, completion_tokens: 1 } }))
    kept2.push("[DONE]")
    expect(kept2.unreported).toBeUndefined()
    // A whole answer's `usage: null` is no promise: its text is counted exactly.
    const whole = makeChunkParser(parserOptions)
    whole.pushChunk(completionAsChunk({ choices: [{ index: 0, message: { role: "assistant", content: "hello world" }, finish_reason: "stop" }], usage: null }))
    whole.end()
    expect(whole.unreported).toEqual({ generated: "hello world" })
  })

  it("fails on an error chunk, invalid JSON, a body cut short, or nothing at all", () => {
    const midStream = failure(() => parse(sse(upstreamChunk({ content: "par" }), { error: { message: "overloaded right now", type: "overloaded_error" } })))
    expect(midStream).toMatchObject({ status: 503, type: "overloaded_error", message: "overloaded right now", retryable: true })
    expect(failure(() => parse(sse({ error: { message: "bad", type: "invalid_request_error" } })))).toMatchObject({ status: 400, retryable: false })
    expect(failure(() => parse("data: {not json\n\n"))).toMatchObject({ status: 502, retryable: true })
    expect(failure(() => parse(sse(upstreamChunk({ content: "half" }))))).toMatchObject({ status: 502, retryable: true })
    expect(failure(() => parse(""))).toMatchObject({ status: 502 })
    expect(failure(() => parse(sse("[DONE]")))).toMatchObject({ status: 502 })
  })
})
