/**
 * The Response object and its output items. One function builds every envelope — the
 * non-streaming body, the snapshots in `response.created`/`in_progress`, and the terminal event's
 * full response — so a streamed response that is stored replays byte for byte as the body a
 * non-streaming call would have returned.
 *
 * Items: visible thinking → `reasoning` (summary text; the signature rides in `encrypted_content`
 * so a client that sends the item back round-trips it), text → one `message` with one
 * `output_text` part, a tool call → `function_call`. Item ids derive from the response id and the
 * block's position (see `ids.ts`).
 */
import type { ContentBlock, OutputBlock } from "../../model/content.ts"
import type { CanonicalResponse, StopReason } from "../../model/events.ts"
import type { Usage } from "../../model/usage.ts"
import { totalTokens } from "../../model/usage.ts"
import type { EncodeContext } from "../dialect.ts"
import type { ResponsesEcho } from "./decode.ts"
import { callId, itemId } from "./ids.ts"

export type ItemStatus = "in_progress" | "completed" | "incomplete"

export const outputTextPart = (text: string) => ({ type: "output_text", text, annotations: [], logprobs: [] })

export const summaryPart = (text: string) => ({ type: "summary_text", text })

/** The wire item for one output block at position `index`. */
export const outputItem = (block: OutputBlock, responseId: string, index: number, status: ItemStatus = "completed") => {
  switch (block.type) {
    case "text":
      return { id: itemId("msg", responseId, index), type: "message", status, role: "assistant", content: [outputTextPart(block.text)] }
    case "thinking":
      return {
        id: itemId("rs", responseId, index),
        type: "reasoning",
        summary: [summaryPart(block.thinking)],
        ...(block.signature === "" ? {} : { encrypted_content: block.signature })
      }
    case "redacted_thinking":
      return { id: itemId("rs", responseId, index), type: "reasoning", summary: [], encrypted_content: block.data }
    case "tool_use":
      return {
        id: itemId("fc", responseId, index),
        type: "function_call",
        status,
        arguments: JSON.stringify(block.input),
        call_id: callId(block.id),
        name: block.name
      }
  }
}

const responsesUsage = (usage: Usage) => ({
  input_tokens: usage.inputTokens,
  input_tokens_details: { cached_tokens: usage.cachedInputTokens },
  output_tokens: usage.outputTokens,
  output_tokens_details: { reasoning_tokens: usage.reasoningTokens },
  total_tokens: totalTokens(usage)
})

/** `max_tokens` and `refusal` leave the response incomplete, with the reason OpenAI names. */
const incompleteReason = (stopReason: StopReason): string | undefined =>
  stopReason === "max_tokens" ? "max_output_tokens" : stopReason === "refusal" ? "content_filter" : undefined

export interface EnvelopeState {
  readonly status: "in_progress" | "completed" | "incomplete" | "failed"
  readonly output: ReadonlyArray<unknown>
  readonly usage: ReturnType<typeof responsesUsage> | null
  readonly incompleteReason?: string | undefined
  readonly error?: { readonly code: string; readonly message: string } | undefined
}

export const envelope = (context: EncodeContext<ResponsesEcho>, state: EnvelopeState) => {
  const echo = context.echo
  return {
    id: context.id,
    object: "response",
    created_at: context.createdAt,
    status: state.status,
    error: state.error ?? null,
    incomplete_details: state.incompleteReason === undefined ? null : { reason: state.incompleteReason },
    instructions: echo.instructions,
    max_output_tokens: echo.maxOutputTokens,
    model: context.model,
    output: state.output,
    parallel_tool_calls: echo.parallelToolCalls,
    previous_response_id: echo.previousResponseId,
    prompt_cache_key: echo.promptCacheKey,
    reasoning: echo.reasoning,
    safety_identifier: echo.safetyIdentifier,
    store: echo.store,
    temperature: echo.temperature,
    text: echo.text,
    tool_choice: echo.toolChoice,
    tools: echo.tools,
    top_p: echo.topP,
    truncation: "disabled",
    usage: state.usage,
    user: echo.user,
    metadata: echo.metadata
  }
}

export const encodeResponse = (response: CanonicalResponse, context: EncodeContext<ResponsesEcho>) => {
  const reason = incompleteReason(response.stopReason)
  return envelope(context, {
    status: reason === undefined ? "completed" : "incomplete",
    output: response.content.map((block, index) => outputItem(block, context.id, index)),
    usage: responsesUsage(response.usage),
    incompleteReason: reason
  })
}

/**
 * The output as it returns in a later turn's input: what decoding these items would give
 * (tool calls under their wire `call_id`), so a stored transcript and a client that re-sends
 * `response.output` describe the same conversation.
 */
export const outputAsInput = (content: ReadonlyArray<OutputBlock>): Array<ContentBlock> =>
  content
    .filter((block) => !(block.type === "thinking" && block.signature === ""))
    .map((block) => (block.type === "tool_use" ? { ...block, id: callId(block.id) } : block))
