import { describe, expect, it } from "vitest"
import { assistantMessage, userMessage } from "../../src/model/content.ts"
import { makeRequest } from "../../src/model/request.ts"
import {
  countMessageTokens,
  countRequestInputTokens,
  countTextTokens,
  DOCUMENT_TOKENS,
  IMAGE_TOKENS,
  MESSAGE_OVERHEAD_TOKENS,
  REQUEST_OVERHEAD_TOKENS,
  tokenPieces,
  TOOL_OVERHEAD_TOKENS
} from "../../src/model/tokens.ts"

describe("countTextTokens", () => {
  it("counts with o200k_base", () => {
    // Known o200k_base counts (tiktoken agrees): "The quick brown fox." is The|quick|brown|fox|.
    expect(countTextTokens("The quick brown fox.")).toBe(5)
    expect(countTextTokens("Hello world")).toBe(2)
    expect(countTextTokens("You are a helpful assistant.")).toBe(6)
    expect(countTextTokens("")).toBe(0)
  })

  it("counts special-token strings as plain text instead of throwing", () => {
    expect(countTextTokens("<|endoftext|>")).toBe(7)
  })

  it("is stable across calls and grows with the text", () => {
    const text = "lorem ipsum dolor sit amet ".repeat(500)
    expect(countTextTokens(text)).toBe(countTextTokens(text))
    expect(countTextTokens(text + text)).toBeGreaterThan(countTextTokens(text))
  })
})

describe("tokenPieces", () => {
  it("splits a text into pieces that concatenate back and sum to its token count", () => {
    const text = "héllo 日本語 🎉 done, and the quick brown fox jumps over the lazy dog."
    const pieces = tokenPieces(text)
    expect(pieces.map((p) => p.text).join("")).toBe(text)
    expect(pieces.reduce((sum, p) => sum + p.tokens, 0)).toBe(countTextTokens(text))
    expect(pieces.every((p) => !p.text.includes("\uFFFD"))).toBe(true)
  })

  it("leaves the shared decoder clean for later calls", () => {
    tokenPieces("🎉🎉🎉 emoji at the end 🎉")
    const after = tokenPieces("plain text")
    expect(after.map((p) => p.text).join("")).toBe("plain text")
  })
})

describe("countRequestInputTokens", () => {
  const question = "What is the weather in Paris?" // 7 tokens

  it("adds message and request overheads to the text", () => {
    const request = makeRequest({ model: "svc-x", messages: [userMessage(question)] })
    expect(countRequestInputTokens(request)).toBe(REQUEST_OVERHEAD_TOKENS + MESSAGE_OVERHEAD_TOKENS + 7)
  })

  it("counts the system prompt as one more message", () => {
    const request = makeRequest({
      model: "svc-x",
      system: [{ type: "text", text: "You are a helpful assistant." }],
      messages: [userMessage(question)]
    })
    expect(countRequestInputTokens(request)).toBe(REQUEST_OVERHEAD_TOKENS + 2 * MESSAGE_OVERHEAD_TOKENS + 6 + 7)
  })

  it("charges images and binary documents a flat cost, text documents by their text", () => {
    const message = userMessage([
      { type: "image", source: { kind: "base64", mediaType: "image/png", data: "iVBORw0KGgo=".repeat(1000) } },
      { type: "document", source: { kind: "base64", mediaType: "application/pdf", data: "JVBERi0=" } },
      { type: "document", source: { kind: "text", mediaType: "text/plain", text: "Hello world" } }
    ])
    expect(countMessageTokens(message)).toBe(MESSAGE_OVERHEAD_TOKENS + IMAGE_TOKENS + DOCUMENT_TOKENS + 2)
  })

  it("counts tool definitions, tool calls and tool results", () => {
    const schema = { type: "object", properties: { city: { type: "string" } }, required: ["city"] } // 19 tokens as JSON
    const withTools = makeRequest({
      model: "svc-x",
      tools: [{ name: "get_weather", inputSchema: schema }],
      messages: [
        userMessage(question),
        assistantMessage([{ type: "tool_use", id: "t1", name: "get_weather", input: { city: "Paris" } }]),
        userMessage([{ type: "tool_result", toolUseId: "t1", content: "Hello world", isError: false }])
      ]
    })
    const toolTokens = TOOL_OVERHEAD_TOKENS + 2 + 19
    const callTokens = 2 + countTextTokens(JSON.stringify({ city: "Paris" }))
    expect(countRequestInputTokens(withTools)).toBe(
      REQUEST_OVERHEAD_TOKENS + toolTokens + 3 * MESSAGE_OVERHEAD_TOKENS + 7 + callTokens + 2
    )
  })
})
