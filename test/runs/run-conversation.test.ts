/**
 * The conversation a run's actor keeps from its log (src/runs/run-input.ts): each step's answer,
 * then the caller's tool results for its calls in the order of the calls, the first result per
 * call; events that are neither are ignored.
 */
import { describe, expect, it } from "vitest"
import type { CanonicalRequest } from "../../src/model/request.ts"
import { makeConversation } from "../../src/runs/run-input.ts"
import type { LogEvent } from "../../src/runs/run-record.ts"

const base = { model: "svc-pico-1", messages: [{ role: "user", content: [{ type: "text", text: "look two words up" }] }] } as unknown as CanonicalRequest
const event = (seq: number, type: string, fields: Record<string, unknown> = {}) => ({ seq, type, ...fields }) as unknown as LogEvent
const toolUse = (id: string) => ({ type: "tool_use", id, name: "lookup", input: { q: id } })

describe("Conversation", () => {
  it("appends each answer, then its tool results in call order; the first result of a call counts", () => {
    const conversation = makeConversation()
    expect(conversation.request(base).messages).toEqual(base.messages)
    expect(conversation.lastOutput()).toBeUndefined()
    const events = [
      event(1, "node.started", { nodeId: "node_a" }),
      event(2, "node.completed", { nodeId: "node_a", output: [{ type: "text", text: "looking" }, toolUse("t1"), toolUse("t2")] }),
      event(3, "tool.result", { toolUseId: "t2", content: "second" }),
      event(4, "tool.result", { toolUseId: "t1", content: [{ type: "text", text: "first" }], isError: true }),
      event(5, "tool.result", { toolUseId: "t1", content: "ignored: not the first result" }),
      event(6, "node.retry", { nodeId: "node_b" }),
      event(7, "node.completed", { nodeId: "node_b", output: [{ type: "text", text: "done" }] })
    ]
    for (const e of events) conversation.add(e)
    const messages = conversation.request(base).messages
    expect(messages).toEqual([
      ...base.messages,
      { role: "assistant", content: events[1].output },
      {
        role: "user",
        content: [
          { type: "tool_result", toolUseId: "t1", content: [{ type: "text", text: "first" }], isError: true },
          { type: "tool_result", toolUseId: "t2", content: "second", isError: false }
        ]
      },
      { role: "assistant", content: [{ type: "text", text: "done" }] }
    ])
    expect(conversation.lastOutput()).toEqual([{ type: "text", text: "done" }])
    // the base request is not changed
    expect(base.messages.length).toBe(1)
  })

  it("a step whose calls have no results yet adds its answer alone", () => {
    const conversation = makeConversation()
    conversation.add(event(1, "node.completed", { nodeId: "node_a", output: [toolUse("t1")] }))
    expect(conversation.request(base).messages.slice(1)).toEqual([{ role: "assistant", content: [toolUse("t1")] }])
  })
})
