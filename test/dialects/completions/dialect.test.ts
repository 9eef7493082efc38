/** Legacy completions: decode of every field, refusals naming the field, body and stream encoding. */
import { describe, expect, it } from "vitest"
import { completionsDialect } from "../../../src/dialects/completions/index.ts"
import type { CompletionsEcho } from "../../../src/dialects/completions/index.ts"
import type { CanonicalEvent } from "../../../src/model/events.ts"
import { collect } from "../../../src/model/events.ts"
import { makeUsage } from "../../../src/model/usage.ts"
import { contextFor, decodeErrorWith, decodeWith, encodeEvents, sseFrames } from "../chat/support.ts"

const decode = decodeWith(completionsDialect)
const decodeError = decodeErrorWith(completionsDialect)
const base = { model: "gpt-3.5-turbo-instruct", prompt: "Once upon" }

const usage = makeUsage({ inputTokens: 9, outputTokens: 4, cachedInputTokens: 2 })
const events: Array<CanonicalEvent> = [
  { type: "message_start", model: "svc-pico-1" },
  { type: "block_start", index: 0, block: { type: "text" } },
  { type: "text_delta", index: 0, text: " a time" },
  { type: "text_delta", index: 0, text: " there" },
  { type: "block_stop", index: 0 },
  { type: "message_stop", stopReason: "max_tokens", usage }
]

describe("completions decode", () => {
  it("turns the prompt into one user turn with OpenAI's default ceiling of 16", () => {
    const { request, echo } = decode(base)
    expect(request.model).toBe("gpt-3.5-turbo-instruct")
    expect(request.messages).toEqual([{ role: "user", content: [{ type: "text", text: "Once upon" }] }])
    expect(request.maxOutputTokens).toBe(16)
    expect(echo).toEqual({ includeUsage: false })
    expect(decode({ ...base, prompt: ["only one"] }).request.messages[0].content).toEqual([{ type: "text", text: "only one" }])
  })

  it("maps the sampling fields, stop, stream, usage and user", () => {
    const { request, echo } = decode({
      ...base, max_tokens: 40, temperature: 1.2, top_p: 0.5, stop: ["\n"], seed: 3, user: "u1",
      stream: true, stream_options: { include_usage: true }, echo: true, presence_penalty: 1, logit_bias: {}
    })
    expect(request).toMatchObject({ maxOutputTokens: 40, temperature: 1.2, topP: 0.5, stopSequences: ["\n"], seed: 3, user: "u1", cacheAffinity: "u1", stream: true })
    expect(echo).toEqual({ includeUsage: true, echoPrompt: "Once upon" })
  })

  it("refuses what it cannot honor, naming the field", () => {
    const cases: Array<[Record<string, unknown>, string]> = [
      [{ prompt: [1, 2, 3] }, "prompt"],
      [{ prompt: [[1, 2]] }, "prompt"],
      [{ prompt: ["a", "b"] }, "prompt"],
      [{ prompt: 5 }, "prompt"],
      [{ suffix: "end" }, "suffix"],
      [{ logprobs: 2 }, "logprobs"],
      [{ best_of: 3 }, "best_of"],
      [{ n: 2 }, "n"],
      [{ max_tokens: 0 }, "max_tokens"],
      [{ temperature: 3 }, "temperature"],
      [{ stop: ["a", "b", "c", "d", "e"] }, "stop"],
      [{ model: "" }, "model"]
    ]
    for (const [extra, param] of cases) expect(decodeError({ ...base, ...extra }).param, JSON.stringify(extra)).toBe(param)
    expect(decode({ ...base, suffix: "", n: 1, best_of: 1, logprobs: null }).request.model).toBe("gpt-3.5-turbo-instruct")
  })
})

describe("completions encode", () => {
  const context = (echo: CompletionsEcho) => ({ ...contextFor(echo), id: "cmpl-test" })

  it("answers a text_completion body, with the prompt first when echo is on", () => {
    const body = completionsDialect.encodeResponse(collect(events), context({ includeUsage: false })) as any
    expect(body).toMatchObject({ id: "cmpl-test", object: "text_completion", created: 1_700_000_000, model: "svc-nova-mini" })
    expect(body.choices).toEqual([{ text: " a time there", index: 0, logprobs: null, finish_reason: "length" }])
    expect(body.usage).toEqual({ prompt_tokens: 9, completion_tokens: 4, total_tokens: 13 })
    const echoed = completionsDialect.encodeResponse(collect(events), context({ includeUsage: false, echoPrompt: "Once upon" })) as any
    expect(echoed.choices[0].text).toBe("Once upon a time there")
  })

  it("streams text_completion chunks, finish_reason last, usage chunk, [DONE]", () => {
    const frames = sseFrames(encodeEvents(completionsDialect, context({ includeUsage: true, echoPrompt: "Once upon" }), events))
    expect(frames.every((frame) => frame.lines.every((line) => line.startsWith("data: ")))).toBe(true)
    expect(frames.at(-1)!.data).toBe("[DONE]")
    const chunks = frames.slice(0, -1).map((frame) => frame.data)
    expect(chunks.every((chunk) => chunk.object === "text_completion" && chunk.id === "cmpl-test")).toBe(true)
    expect(chunks.slice(0, -1).map((chunk) => chunk.choices[0].text).join("")).toBe("Once upon a time there")
    expect(chunks.at(-2).choices[0]).toEqual({ text: "", index: 0, logprobs: null, finish_reason: "length" })
    expect(chunks.at(-1)).toMatchObject({ choices: [], usage: { prompt_tokens: 9, completion_tokens: 4, total_tokens: 13 } })
    expect(chunks.slice(0, -1).every((chunk) => chunk.usage === null)).toBe(true)
    const plain = sseFrames(encodeEvents(completionsDialect, context({ includeUsage: false }), events))
    expect(plain.slice(0, -1).every((frame) => frame.data.choices.length === 1 && !("usage" in frame.data))).toBe(true)
  })

  it("ends a failed stream with the error chunk and no [DONE]", () => {
    const encoder = completionsDialect.streamEncoder(context({ includeUsage: false }))
    const failure = encoder.error({ status: 502, type: "api_error", message: "broken" })
    expect(sseFrames(failure)[0].data).toEqual({ error: { message: "broken", type: "api_error", param: null, code: null } })
    expect(failure).not.toContain("[DONE]")
    expect(encoder.keepalive().startsWith(":")).toBe(true)
  })
})
