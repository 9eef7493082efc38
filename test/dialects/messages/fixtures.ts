/** Canonical event lists shared by the Messages dialect and Anthropic adapter tests. */
import type { CanonicalEvent } from "../../../src/model/events.ts"
import { makeUsage } from "../../../src/model/usage.ts"

export const finalUsage = makeUsage({ inputTokens: 120, cachedInputTokens: 100, outputTokens: 57, reasoningTokens: 20 })

/** A turn with every block kind: thinking (signature in two parts), redacted thinking, text, a tool call. */
export const fullTurn: ReadonlyArray<CanonicalEvent> = [
  { type: "message_start", model: "svc-atlas-1", usage: makeUsage({ inputTokens: 120, cachedInputTokens: 100 }) },
  { type: "block_start", index: 0, block: { type: "thinking" } },
  { type: "thinking_delta", index: 0, thinking: "Let me " },
  { type: "thinking_delta", index: 0, thinking: "think." },
  { type: "signature_delta", index: 0, signature: "c2ln" },
  { type: "signature_delta", index: 0, signature: "bmF0dXJl" },
  { type: "block_stop", index: 0 },
  { type: "block_start", index: 1, block: { type: "redacted_thinking", data: "b3BhcXVl" } },
  { type: "block_stop", index: 1 },
  { type: "block_start", index: 2, block: { type: "text" } },
  { type: "text_delta", index: 2, text: "Hi" },
  { type: "text_delta", index: 2, text: " there" },
  { type: "block_stop", index: 2 },
  { type: "block_start", index: 3, block: { type: "tool_use", id: "toolu_1", name: "get_weather" } },
  { type: "tool_input_delta", index: 3, partialJson: "{\"city\":" },
  { type: "tool_input_delta", index: 3, partialJson: "\"Oslo\"}" },
  { type: "block_stop", index: 3 },
  { type: "message_stop", stopReason: "tool_use", usage: finalUsage }
]

