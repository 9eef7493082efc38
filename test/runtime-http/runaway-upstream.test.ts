/**
 * An upstream that ignores the output ceiling it was sent (`max_tokens`) and streams without end
 * is stopped once what it delivered is far past that ceiling (`Delivered.overran`): the client's
 * stream ends with its dialect's error event, the upstream's connection is closed, on either
 * upstream adapter. Below that line an overrunning answer is forwarded as it is.
 */
import Anthropic from "@anthropic-ai/sdk"
import OpenAI from "openai"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { runawayLine } from "../../src/runtime/delivered.ts"
import { type RunawayUpstream, startRunawayUpstream } from "../support/runaway-upstream.ts"
import { createKey, gatewayOnUpstream, type TestGateway } from "./support.ts"

const MAX_TOKENS = 16
/** Past this many words (each one letter run: one token at least), the gateway must stop the stream. */
const LINE = runawayLine(MAX_TOKENS)
const wordsIn = (text: string) => text.split(" ").filter((word) => word !== "").length
/** Where the test stops reading itself, so that a gateway that never stops fails it instead of hanging it. */
const GIVE_UP_CHARS = LINE * 20 * "word ".length

describe("an upstream that streams past its output ceiling without end", () => {
  let upstream: RunawayUpstream
  let gw: TestGateway
  let openai: OpenAI
  let anthropic: Anthropic

  beforeAll(async () => {
    upstream = await startRunawayUpstream()
    gw = await gatewayOnUpstream(upstream.url)
    const key = (await createKey(gw)).secret
    openai = new OpenAI({ apiKey: key, baseURL: `${gw.baseUrl}/v1`, maxRetries: 0 })
    anthropic = new Anthropic({ apiKey: key, baseURL: gw.baseUrl, maxRetries: 0 })
  })

  afterAll(async () => {
    await upstream?.close()
    await gw?.close()
  })

  /** A Chat Completions stream read with the OpenAI SDK: the text received, and how it ended. */
  const chat = async (model: string) => {
    let text = ""
    const stream = await openai.chat.completions.create({ model, stream: true, max_tokens: MAX_TOKENS, messages: [{ role: "user", content: "go on" }] })
    try {
      for await (const chunk of stream) {
        text += chunk.choices[0]?.delta.content ?? ""
        if (text.length > GIVE_UP_CHARS) break
      }
      return { text, error: undefined }
    } catch (error) {
      return { text, error: error as Error }
    }
  }

  for (const [model, backend] of [["svc-pico-1", "openai-compatible"], ["svc-lyra-3", "anthropic"]] as const) {
    it(`is stopped, and the client's stream ends with an error event (${backend})`, async () => {
      upstream.stopAfterWords = undefined
      const closedBefore = upstream.seen.closed
      const { text, error } = await chat(model)
      expect(upstream.seen.maxTokens).toBe(MAX_TOKENS)
      expect(error).toBeInstanceOf(OpenAI.APIError)
      expect(error!.message).toContain(`past the ${MAX_TOKENS}-token output ceiling`)
      // Everything up to the line was delivered; the stream stopped soon after it.
      expect(wordsIn(text)).toBeGreaterThan(LINE)
      expect(wordsIn(text)).toBeLessThan(LINE * 20)
      await expect.poll(() => upstream.seen.closed).toBe(closedBefore + 1)
    })
  }

  it("is stopped on Chinese text too, written without spaces (each CJK character is at least 1/11 of a token)", async () => {
    // Ten Han characters and a full stop a delta: the floor counts ~0.9 tokens a delta, where by
    // length alone (÷ 128) it counted 0.09 and read ~130,000 characters before the line. Through
    // the Anthropic placement: a third stopped stream on the other would open its circuit before
    // the last test.
    upstream.delta = "长江是中国最长的河流。"
    try {
      let text = ""
      let failure: unknown
      const stream = await openai.chat.completions.create({ model: "svc-lyra-3", stream: true, max_tokens: MAX_TOKENS, messages: [{ role: "user", content: "go on" }] })
      try {
        for await (const chunk of stream) {
          text += chunk.choices[0]?.delta.content ?? ""
          if (text.length > LINE * 40) break
        }
      } catch (error) {
        failure = error
      }
      expect(failure, `${text.length} characters read`).toBeInstanceOf(OpenAI.APIError)
      expect(text.length).toBeGreaterThan(LINE * 10)
    } finally {
      upstream.delta = "word ".repeat(8)
    }
  })

  it("is stopped on the Messages surface too, with Anthropic's error event", async () => {
    upstream.stopAfterWords = undefined
    const stream = anthropic.messages.stream({ model: "svc-lyra-3", max_tokens: MAX_TOKENS, messages: [{ role: "user", content: "go on" }] })
    let text = ""
    stream.on("text", (delta) => {
      text += delta
      if (text.length > GIVE_UP_CHARS) stream.abort()
    })
    const error = await stream.finalMessage().then(() => undefined, (e: Error) => e)
    expect(error).toBeInstanceOf(Anthropic.APIError)
    expect(error!.message).toContain("api_error")
    expect(error!.message).toContain(`past the ${MAX_TOKENS}-token output ceiling`)
    expect(wordsIn(text)).toBeGreaterThan(LINE)
  })

  it("is stopped on the Responses surface too, the SDK raising the stream's error event", async () => {
    upstream.stopAfterWords = undefined
    const stream = await openai.responses.create({ model: "svc-pico-1", stream: true, max_output_tokens: MAX_TOKENS, input: "go on" })
    let text = ""
    let thrown: Error | undefined
    try {
      for await (const event of stream) {
        if (event.type === "response.output_text.delta") text += event.delta
        if (text.length > GIVE_UP_CHARS) break
      }
    } catch (error) {
      thrown = error as Error
    }
    expect(wordsIn(text)).toBeGreaterThan(LINE)
    expect(thrown).toBeInstanceOf(OpenAI.APIError)
    expect(thrown!.message).toContain(`past the ${MAX_TOKENS}-token output ceiling`)
  })

  it("below the line, an answer longer than its ceiling is forwarded whole", async () => {
    upstream.stopAfterWords = LINE - 40
    const { text, error } = await chat("svc-pico-1")
    expect(error).toBeUndefined()
    expect(wordsIn(text)).toBe(LINE - 40)
  })
})
