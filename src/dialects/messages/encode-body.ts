/**
 * Canonical response → the Messages envelope `{id, type: "message", role, model, content,
 * stop_reason, stop_sequence, usage}` (what `messages.create` returns without streaming).
 *
 * Usage is split the Messages way: canonical `inputTokens` includes cached tokens, the wire's
 * `input_tokens` does not (`cache_read_input_tokens` carries them). Prompt-cache writes are never
 * billed separately here, so `cache_creation_input_tokens` is always 0. Reasoning tokens, visible or
 * hidden, go in `output_tokens_details.thinking_tokens` (newer SDKs read it) when there are any.
 */
import type { OutputBlock } from "../../model/content.ts"
import type { CanonicalResponse } from "../../model/events.ts"
import type { Usage } from "../../model/usage.ts"
import { uncachedInputTokens } from "../../model/usage.ts"
import type { EncodeContext } from "../dialect.ts"

export interface WireUsage {
  readonly input_tokens: number
  readonly output_tokens: number
  readonly cache_creation_input_tokens: number
  readonly cache_read_input_tokens: number
  readonly output_tokens_details?: { readonly thinking_tokens: number }
}

export const messagesUsage = (usage: Usage): WireUsage => ({
  input_tokens: uncachedInputTokens(usage),
  output_tokens: usage.outputTokens,
  cache_creation_input_tokens: 0,
  cache_read_input_tokens: usage.cachedInputTokens,
  ...(usage.reasoningTokens > 0 ? { output_tokens_details: { thinking_tokens: usage.reasoningTokens } } : {})
})

const wireBlock = (block: OutputBlock) => {
  switch (block.type) {
    case "text":
      return { type: "text", text: block.text }
    case "thinking":
      return { type: "thinking", thinking: block.thinking, signature: block.signature }
    case "redacted_thinking":
      return { type: "redacted_thinking", data: block.data }
    case "tool_use":
      return { type: "tool_use", id: block.id, name: block.name, input: block.input }
  }
}

export const encodeMessage = (response: CanonicalResponse, context: EncodeContext<unknown>) => ({
  id: context.id,
  type: "message",
  role: "assistant",
  // The catalog id that served, never an upstream name (the same value as `xsvc-model`).
  model: context.model,
  content: response.content.map(wireBlock),
  stop_reason: response.stopReason,
  stop_sequence: response.stopSequence ?? null,
  usage: messagesUsage(response.usage)
})
