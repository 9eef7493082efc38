/**
 * Chaining arithmetic: what a stored conversation contributes to the next request, and what the
 * next stored conversation holds. Instructions never carry over; system messages sent as input do.
 */
import { describe, expect, it } from "vitest"
import { collect } from "../../../src/model/events.ts"
import { continueConversation, emptyTranscript, readTranscript, withAnswer } from "../../../src/stored-responses/transcript.ts"
import { decodeOk, fullScript, usage } from "./fixtures.ts"

describe("responses transcript", () => {
  it("first turn: instructions apply to the request only; input system text joins the conversation", () => {
    const decoded = decodeOk({ model: "m", instructions: "I1", input: [{ role: "developer", content: "D" }, { role: "user", content: "u1" }] })
    const { request, conversation } = continueConversation(emptyTranscript, decoded)
    expect(request.system.map((b) => b.text)).toEqual(["I1", "D"])
    expect(conversation.system.map((b) => b.text)).toEqual(["D"])
    expect(conversation.messages).toEqual(decoded.request.messages)
  })

  it("next turn: earlier conversation first, then the new items; the answer is stored with call ids", () => {
    const first = continueConversation(emptyTranscript, decodeOk({ model: "m", input: [{ role: "system", content: "S" }, { role: "user", content: "u1" }] }))
    const stored = withAnswer(first.conversation, collect(fullScript()))
    // Through JSON and back, as the store returns it.
    const previous = readTranscript(JSON.parse(JSON.stringify(stored)))
    expect(previous.messages.at(-1)).toMatchObject({ role: "assistant", content: [{ type: "thinking" }, { type: "text" }, { type: "tool_use", id: "call_abc" }] })

    const next = continueConversation(previous, decodeOk({ model: "m", instructions: "I2", input: [{ type: "function_call_output", call_id: "call_abc", output: "ok" }] }))
    expect(next.request.system.map((b) => b.text)).toEqual(["I2", "S"])
    expect(next.request.messages.map((m) => m.role)).toEqual(["user", "assistant", "user"])
    expect(next.request.messages[2].content[0]).toEqual({ type: "tool_result", toolUseId: "call_abc", content: "ok", isError: false })
  })

  it("an answer with no output adds no empty assistant turn", () => {
    const empty = collect([{ type: "message_start", model: "m" }, { type: "message_stop", stopReason: "max_tokens", usage }])
    expect(withAnswer(emptyTranscript, empty)).toEqual(emptyTranscript)
  })
})
