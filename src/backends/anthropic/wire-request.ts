/**
 * Canonical request → the Messages API request an Anthropic upstream accepts (pure).
 *
 * The canonical request may come from any dialect, so a few things are adjusted to what the
 * upstream would otherwise reject:
 * - `max_tokens` is required upstream: absent, DEFAULT_MAX_TOKENS (or enough above the thinking
 *   budget);
 * - thinking is sent only to a reasoning model, with reasoning enabled AND visible. Hidden
 *   reasoning has no Messages equivalent, and enabling it anyway would make the next tool-use turn
 *   fail (the client never saw the thinking blocks it would have to send back). Nor with a forced
 *   tool choice or a ceiling too small for the minimum budget, both of which the upstream refuses;
 * - with thinking on, `temperature` (unless 1), `top_k` and a `top_p` under 0.95 are dropped (the
 *   upstream refuses them);
 * - `temperature` is clamped to 0..1 (Chat/Responses allow up to 2);
 * - empty text blocks are dropped, and thinking blocks without a signature (reasoning that did not
 *   come from this API) are dropped, because the upstream rejects both;
 * - JSON response formats become a system instruction (the upstream has no non-beta equivalent).
 */
import type { ContentBlock, DocumentBlock, ImageBlock, TextBlock } from "../../model/content.ts"
import { isPlainObject } from "../../util/json.ts"
import type { CanonicalRequest, ReasoningEffort } from "../../model/request.ts"
import { isToolCallForced } from "../../model/request.ts"
import { pausesAt, runAtOnce, type Sliced } from "../../util/slices.ts"
import type { PlacementRuntime } from "../backend.ts"

/** What the translation needs to know of the placement. */
export type WireTarget = Pick<PlacementRuntime, "upstreamModel" | "reasoning">

/** Output ceiling sent when the client set none; every current Messages model allows at least this. */
const DEFAULT_MAX_TOKENS = 4096
/** The upstream's smallest accepted `thinking.budget_tokens`. */
const MIN_THINKING_BUDGET = 1024
const effortBudget: Record<ReasoningEffort, number> = { minimal: 1024, low: 2048, medium: 4096, high: 16384 }

type Wire = Record<string, unknown>

const imageSource = (block: ImageBlock): Wire =>
  block.source.kind === "base64"
    ? { type: "base64", media_type: block.source.mediaType, data: block.source.data }
    : { type: "url", url: block.source.url }

const documentBlock = (block: DocumentBlock): Wire => {
  const { source } = block
  return {
    type: "document",
    source: source.kind === "base64"
      ? { type: "base64", media_type: source.mediaType, data: source.data }
      : source.kind === "url"
      ? { type: "url", url: source.url }
      : { type: "text", media_type: "text/plain", data: source.text },
    ...(block.title === undefined ? {} : { title: block.title })
  }
}

const part = (block: TextBlock | ImageBlock | DocumentBlock): Wire =>
  block.type === "text"
    ? { type: "text", text: block.text }
    : block.type === "image"
    ? { type: "image", source: imageSource(block) }
    : documentBlock(block)

/** One block as the upstream takes it, or undefined for a block it would reject. */
const wireBlock = (block: ContentBlock): Wire | undefined => {
  switch (block.type) {
    case "text":
      return block.text === "" ? undefined : part(block)
    case "image":
    case "document":
      return part(block)
    case "tool_use":
      return { type: "tool_use", id: block.id, name: block.name, input: isPlainObject(block.input) ? block.input : {} }
    case "tool_result":
      return {
        type: "tool_result",
        tool_use_id: block.toolUseId,
        content: typeof block.content === "string" ? block.content : block.content.filter((p) => p.type !== "text" || p.text !== "").map(part),
        ...(block.isError ? { is_error: true } : {})
      }
    case "thinking":
      return block.signature === "" ? undefined : { type: "thinking", thinking: block.thinking, signature: block.signature }
    case "redacted_thinking":
      return { type: "redacted_thinking", data: block.data }
  }
}

/**
 * The JSON response format as a system instruction. `schemaText`: the schema's JSON made
 * beforehand (in slices, by the caller, when the schema is large); else it is made here.
 */
const formatInstruction = (request: CanonicalRequest, schemaText: string | undefined): string | undefined => {
  const format = request.responseFormat
  if (format.type === "json_object") return "Respond with a single JSON object and nothing else."
  if (format.type === "json_schema") {
    return `Respond with a single JSON value matching this JSON schema and nothing else: ${schemaText ?? JSON.stringify(format.schema)}`
  }
  return undefined
}

/** The thinking budget to send, or undefined when thinking must stay off upstream. */
const thinkingBudget = (request: CanonicalRequest, target: WireTarget, maxTokens: number): number | undefined => {
  const { reasoning } = request
  if (!target.reasoning || !reasoning.enabled || !reasoning.visible || isToolCallForced(request)) return undefined
  const wanted = Math.max(MIN_THINKING_BUDGET, reasoning.budgetTokens ?? effortBudget[reasoning.effort ?? "medium"])
  const budget = Math.min(wanted, maxTokens - 1)
  return budget >= MIN_THINKING_BUDGET ? budget : undefined
}

const maxTokensOf = (request: CanonicalRequest): number => {
  if (request.maxOutputTokens !== undefined) return request.maxOutputTokens
  const budget = request.reasoning.enabled && request.reasoning.visible ? request.reasoning.budgetTokens ?? 0 : 0
  return Math.max(DEFAULT_MAX_TOKENS, budget + DEFAULT_MAX_TOKENS)
}

/**
 * The wire body, with a pause every few messages (a request of 16,000 messages is milliseconds of
 * translating). `schemaText`: see `formatInstruction`.
 */
export function* wireRequest(request: CanonicalRequest, target: WireTarget, stream = true, schemaText?: string): Sliced<Wire> {
  const messages: Array<Wire> = []
  for (let i = 0; i < request.messages.length; i++) {
    const message = request.messages[i]
    messages.push({ role: message.role, content: message.content.map(wireBlock).filter((block) => block !== undefined) })
    if (pausesAt(i)) yield
  }
  const maxTokens = maxTokensOf(request)
  const budget = thinkingBudget(request, target, maxTokens)
  const instruction = formatInstruction(request, schemaText)
  const system = [...request.system.filter((b) => b.text !== ""), ...(instruction === undefined ? [] : [{ type: "text", text: instruction }])]
  const temperature = request.temperature === undefined ? undefined : Math.min(1, Math.max(0, request.temperature))
  const keepTemperature = temperature !== undefined && (budget === undefined || temperature === 1)
  const choice = request.toolChoice
  return {
    model: target.upstreamModel,
    max_tokens: maxTokens,
    messages,
    ...(system.length === 0 ? {} : { system: system.map((block) => ({ type: "text", text: block.text })) }),
    ...(request.tools.length === 0 ? {} : {
      tools: request.tools.map((tool) => ({
        name: tool.name,
        ...(tool.description === undefined ? {} : { description: tool.description }),
        input_schema: tool.inputSchema
      })),
      tool_choice: {
        ...(choice.type === "tool" ? { type: "tool", name: choice.name } : { type: choice.type }),
        ...(choice.type === "none" || request.parallelToolCalls === undefined ? {} : { disable_parallel_tool_use: !request.parallelToolCalls })
      }
    }),
    ...(keepTemperature ? { temperature } : {}),
    ...(request.topP === undefined || (budget !== undefined && request.topP < 0.95) ? {} : { top_p: request.topP }),
    ...(request.topK === undefined || budget !== undefined ? {} : { top_k: request.topK }),
    ...(request.stopSequences.length === 0 ? {} : { stop_sequences: request.stopSequences }),
    ...(budget === undefined ? {} : { thinking: { type: "enabled", budget_tokens: budget } }),
    ...(request.cacheAffinity === undefined ? {} : { metadata: { user_id: request.cacheAffinity } }),
    stream
  }
}

/** `wireRequest` at once (a caller that cannot pause; tests). */
export const toWireRequest = (request: CanonicalRequest, target: WireTarget, stream = true, schemaText?: string): Wire =>
  runAtOnce(wireRequest(request, target, stream, schemaText))
