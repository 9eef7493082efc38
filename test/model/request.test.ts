import { describe, expect, it } from "vitest"
import { joinText, textBlock, toolResultText, userMessage } from "../../src/model/content.ts"
import { isToolCallForced, makeRequest } from "../../src/model/request.ts"
import { addUsage, makeUsage, totalTokens, uncachedInputTokens } from "../../src/model/usage.ts"

describe("makeRequest", () => {
  it("fills neutral defaults and keeps what was given", () => {
    const request = makeRequest({ model: "svc-a", messages: [userMessage("hi")], temperature: 0.2 })
    expect(request.system).toEqual([])
    expect(request.tools).toEqual([])
    expect(request.toolChoice).toEqual({ type: "auto" })
    expect(request.reasoning).toEqual({ enabled: false, visible: false })
    expect(request.responseFormat).toEqual({ type: "text" })
    expect(request.stream).toBe(false)
    expect(request.temperature).toBe(0.2)
    expect("maxOutputTokens" in request).toBe(false)
  })

  it("says when a tool call is forced", () => {
    const tool = { name: "f", inputSchema: { type: "object" } }
    const base = { model: "svc-a", messages: [userMessage("hi")] }
    expect(isToolCallForced(makeRequest({ ...base, tools: [tool], toolChoice: { type: "any" } }))).toBe(true)
    expect(isToolCallForced(makeRequest({ ...base, tools: [tool], toolChoice: { type: "tool", name: "f" } }))).toBe(true)
    expect(isToolCallForced(makeRequest({ ...base, tools: [tool] }))).toBe(false)
    expect(isToolCallForced(makeRequest({ ...base, toolChoice: { type: "any" } }))).toBe(false)
  })
})

describe("content helpers", () => {
  it("joins text blocks and reads tool results in both forms", () => {
    expect(joinText([textBlock("a"), { type: "image", source: { kind: "url", url: "https://x" } }, textBlock("b")])).toBe("ab")
    expect(toolResultText({ type: "tool_result", toolUseId: "t", content: "plain", isError: false })).toBe("plain")
    expect(toolResultText({ type: "tool_result", toolUseId: "t", content: [textBlock("x"), textBlock("y")], isError: false })).toBe("xy")
  })
})

describe("usage", () => {
  it("adds usages and splits cached input", () => {
    const a = makeUsage({ inputTokens: 100, cachedInputTokens: 40, outputTokens: 10, reasoningTokens: 3 })
    const b = makeUsage({ inputTokens: 5, outputTokens: 7 })
    expect(addUsage(a, b)).toEqual({ inputTokens: 105, cachedInputTokens: 40, outputTokens: 17, reasoningTokens: 3 })
    expect(totalTokens(a)).toBe(110)
    expect(uncachedInputTokens(a)).toBe(60)
  })
})
