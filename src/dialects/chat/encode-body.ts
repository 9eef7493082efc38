/**
 * Canonical response → `chat.completion` body. Thinking blocks have no place in this dialect and
 * are dropped; their tokens still show in `usage.completion_tokens_details.reasoning_tokens`.
 */
import type { OutputBlock } from "../../model/content.ts"
import type { Json } from "../../util/json.ts"
import type { CanonicalResponse, StopReason } from "../../model/events.ts"
import type { Usage } from "../../model/usage.ts"
import { totalTokens } from "../../model/usage.ts"
import type { EncodeContext } from "../dialect.ts"
import type { ChatEcho } from "./decode.ts"

export type FinishReason = "stop" | "length" | "tool_calls" | "content_filter"

/** A stop sequence and a natural end are both `stop` here; a refusal is `content_filter`. */
export const finishReason = (stop: StopReason): FinishReason => {
  switch (stop) {
    case "end_turn":
    case "stop_sequence":
      return "stop"
    case "max_tokens":
      return "length"
    case "tool_use":
      return "tool_calls"
    case "refusal":
      return "content_filter"
  }
}

export interface ChatUsage {
  readonly prompt_tokens: number
  readonly completion_tokens: number
  readonly total_tokens: number
  readonly prompt_tokens_details: { readonly cached_tokens: number }
  readonly completion_tokens_details: { readonly reasoning_tokens: number }
}

/** Canonical usage already follows OpenAI's nesting: cached ⊂ prompt, reasoning ⊂ completion. */
export const chatUsage = (usage: Usage): ChatUsage => ({
  prompt_tokens: usage.inputTokens,
  completion_tokens: usage.outputTokens,
  total_tokens: totalTokens(usage),
  prompt_tokens_details: { cached_tokens: usage.cachedInputTokens },
  completion_tokens_details: { reasoning_tokens: usage.reasoningTokens }
})

/** Tool arguments travel as a JSON string; an argument string kept verbatim goes back as is. */
const argumentsJson = (input: Json): string => (typeof input === "string" ? input : JSON.stringify(input))

const toolCalls = (content: ReadonlyArray<OutputBlock>) =>
  content.flatMap((block) =>
    block.type === "tool_use"
      ? [{ id: block.id, type: "function" as const, function: { name: block.name, arguments: argumentsJson(block.input) } }]
      : []
  )

export const encodeChatBody = (response: CanonicalResponse, context: EncodeContext<ChatEcho>) => {
  const calls = toolCalls(response.content)
  const hasText = response.content.some((block) => block.type === "text")
  const text = response.content.map((block) => (block.type === "text" ? block.text : "")).join("")
  return {
    id: context.id,
    object: "chat.completion",
    created: context.createdAt,
    model: context.model,
    choices: [{
      index: 0,
      message: {
        role: "assistant",
        // OpenAI sends null content when the turn is only tool calls.
        content: !hasText && calls.length > 0 ? null : text,
        refusal: null,
        ...(calls.length > 0 ? { tool_calls: calls } : {}),
        annotations: []
      },
      logprobs: null,
      finish_reason: finishReason(response.stopReason)
    }],
    usage: chatUsage(response.usage),
    service_tier: "default",
    system_fingerprint: null
  }
}
