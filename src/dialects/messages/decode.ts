/**
 * Messages wire request → canonical request.
 *
 * Decisions where the spec is silent:
 * - consecutive turns of the same role are merged into one, as the Messages API itself does, so
 *   backends and other dialects always see alternating turns;
 * - `system` turns inside `messages` (newer SDKs allow them) join the system prompt, in order;
 * - blocks in the wrong turn (a tool_result from the assistant, a tool_use from the user) are a 400
 *   naming the block, because no other dialect could express them;
 * - `thinking: {type: "enabled" | "adaptive"}` shows reasoning (`display: "omitted"` hides it);
 *   `output_config.effort` sets the effort; `disable_parallel_tool_use` is `parallelToolCalls`
 *   inverted; `metadata.user_id` is the cache-affinity hint.
 */
import type { ContentBlock, DocumentBlock, ImageBlock, Message, TextBlock } from "../../model/content.ts"
import type { JsonObject } from "../../util/json.ts"
import type { CanonicalRequest, ReasoningEffort, ReasoningSettings, ResponseFormat, ToolChoice, ToolDefinition } from "../../model/request.ts"
import { makeRequest } from "../../model/request.ts"
import { decoderAt, discriminated, refuse } from "../staged-decode.ts"
import { pausesAt, type Sliced, slicedMap } from "../../util/slices.ts"
import type { WireContentBlock, WireMessage, WireRequest, WireThinking, WireToolChoice } from "./wire-schema.ts"
import { ContentBlockMembers, CountTokensEnvelope, CreateMessageEnvelope, MessageEnvelope } from "./wire-schema.ts"
import { shown } from "../../errors.ts"

type WireBlock<T extends WireContentBlock["type"]> = Extract<WireContentBlock, { readonly type: T }>
type WirePart = WireBlock<"text" | "image" | "document">

const imageBlock = (block: WireBlock<"image">): ImageBlock => ({
  type: "image",
  source: block.source.type === "base64"
    ? { kind: "base64", mediaType: block.source.media_type, data: block.source.data }
    : { kind: "url", url: block.source.url }
})

const documentBlock = (block: WireBlock<"document">): DocumentBlock => {
  const { source } = block
  return {
    type: "document",
    source: source.type === "base64"
      ? { kind: "base64", mediaType: source.media_type, data: source.data }
      : source.type === "url"
      ? { kind: "url", url: source.url }
      : { kind: "text", mediaType: source.media_type ?? "text/plain", text: source.data },
    ...(block.title == null ? {} : { title: block.title })
  }
}

const part = (block: WirePart): TextBlock | ImageBlock | DocumentBlock =>
  block.type === "text" ? { type: "text", text: block.text } : block.type === "image" ? imageBlock(block) : documentBlock(block)

const contentBlock = (block: WireContentBlock): ContentBlock => {
  switch (block.type) {
    case "text":
    case "image":
    case "document":
      return part(block)
    case "tool_use":
      return { type: "tool_use", id: block.id, name: block.name, input: block.input as JsonObject }
    case "tool_result":
      return {
        type: "tool_result",
        toolUseId: block.tool_use_id,
        content: typeof block.content === "string" || block.content == null ? block.content ?? "" : block.content.map(part),
        isError: block.is_error ?? false
      }
    case "thinking":
      return { type: "thinking", thinking: block.thinking, signature: block.signature ?? "" }
    case "redacted_thinking":
      return { type: "redacted_thinking", data: block.data }
  }
}

/** Block types that only one side of the conversation can send. */
const onlyFrom: Partial<Record<WireContentBlock["type"], "user" | "assistant">> = {
  image: "user",
  document: "user",
  tool_result: "user",
  tool_use: "assistant",
  thinking: "assistant",
  redacted_thinking: "assistant"
}

/** Refuses a block the message's role cannot send. */
const checkPlacement = (role: WireMessage["role"], block: WireContentBlock, path: string): void => {
  const owner = role === "system" ? (block.type === "text" ? undefined : "user or assistant") : onlyFrom[block.type]
  if (owner !== undefined && owner !== role) refuse(path, `${block.type} blocks belong in ${owner} turns, not in a ${role} turn`)
}

const decodeMessageEnvelope = decoderAt(MessageEnvelope)
const decodeBlock = discriminated("type", ContentBlockMembers)

/** Each message, then each of its blocks by `type` (pausing every PAUSE_EVERY messages: see staged-decode.ts). */
const wireMessages = (raw: ReadonlyArray<unknown>): Sliced<Array<WireMessage>> =>
  slicedMap(raw, (value, i): WireMessage => {
    const path = `messages[${i}]`
    const { role, content } = decodeMessageEnvelope(value, path)
    if (typeof content === "string") return { role, content }
    return {
      role,
      content: content.map((rawBlock, j) => {
        const block = decodeBlock(rawBlock, `${path}.content[${j}]`)
        checkPlacement(role, block, `${path}.content[${j}]`)
        return block
      })
    }
  })

const blocksOf = (content: WireMessage["content"]): Array<ContentBlock> =>
  typeof content === "string" ? [{ type: "text", text: content }] : content.map(contentBlock)

/** System turns lifted out, consecutive same-role turns merged. */
function* conversation(wire: ReadonlyArray<WireMessage>): Sliced<{ system: Array<TextBlock>; messages: Array<Message> }> {
  const system: Array<TextBlock> = []
  const messages: Array<{ role: Message["role"]; content: Array<ContentBlock> }> = []
  for (let i = 0; i < wire.length; i++) {
    const message = wire[i]
    if (pausesAt(i)) yield
    if (message.role === "system") {
      for (const block of blocksOf(message.content)) if (block.type === "text") system.push(block)
      continue
    }
    const last = messages.at(-1)
    if (last?.role === message.role) last.content.push(...blocksOf(message.content))
    else messages.push({ role: message.role, content: blocksOf(message.content) })
  }
  return { system, messages }
}

const toolDefinition = (tool: NonNullable<WireRequest["tools"]>[number]): ToolDefinition => ({
  name: tool.name,
  ...(tool.description == null ? {} : { description: tool.description }),
  inputSchema: tool.input_schema as JsonObject,
  ...(tool.strict == null ? {} : { strict: tool.strict })
})

const toolChoice = (choice: WireToolChoice | null | undefined): { choice: ToolChoice; parallel?: boolean } => {
  if (choice == null) return { choice: { type: "auto" } }
  const canonical: ToolChoice = choice.type === "tool" ? { type: "tool", name: choice.name } : { type: choice.type }
  const disable = choice.type === "none" ? undefined : choice.disable_parallel_tool_use
  return disable == null ? { choice: canonical } : { choice: canonical, parallel: !disable }
}

const efforts: Record<string, ReasoningEffort> = { low: "low", medium: "medium", high: "high", xhigh: "high", max: "high" }

const reasoning = (thinking: WireThinking | null | undefined, effortName: string | null | undefined): ReasoningSettings => {
  const effort = effortName == null ? {} : { effort: efforts[effortName] }
  if (thinking == null || thinking.type === "disabled") return { enabled: false, visible: false, ...effort }
  return {
    enabled: true,
    visible: thinking.display !== "omitted",
    ...effort,
    ...(thinking.budget_tokens == null ? {} : { budgetTokens: thinking.budget_tokens })
  }
}

const responseFormat = (body: WireRequest): ResponseFormat => {
  const format = body.output_config?.format
  // Messages structured outputs are guaranteed, hence strict.
  return format == null ? { type: "text" } : { type: "json_schema", name: "output", schema: format.schema as JsonObject, strict: true }
}

/** The canonical request of a decoded body; refuses one that is well-formed but inconsistent. */
function* canonicalRequest(body: WireRequest, wire: ReadonlyArray<WireMessage>): Sliced<CanonicalRequest> {
  const { system: liftedSystem, messages } = yield* conversation(wire)
  if (messages.length === 0) {
    return refuse("messages", "at least one user or assistant turn is required")
  }
  const tools = (body.tools ?? []).map(toolDefinition)
  const { choice, parallel } = toolChoice(body.tool_choice)
  if (choice.type === "tool" && tools.length > 0 && !tools.some((tool) => tool.name === choice.name)) {
    return refuse("tool_choice.name", `no tool named '${shown(choice.name)}' in tools`)
  }
  const system = body.system == null ? [] : typeof body.system === "string" ? [{ type: "text" as const, text: body.system }] : body.system
  return makeRequest({
    model: body.model,
    system: [...system.filter((block) => block.text !== "").map((block) => ({ type: "text" as const, text: block.text })), ...liftedSystem],
    messages,
    tools,
    toolChoice: choice,
    ...(parallel === undefined ? {} : { parallelToolCalls: parallel }),
    ...(body.max_tokens === undefined ? {} : { maxOutputTokens: body.max_tokens }),
    ...(body.temperature == null ? {} : { temperature: body.temperature }),
    ...(body.top_p == null ? {} : { topP: body.top_p }),
    ...(body.top_k == null ? {} : { topK: body.top_k }),
    stopSequences: body.stop_sequences ?? [],
    reasoning: reasoning(body.thinking, body.output_config?.effort),
    responseFormat: responseFormat(body),
    ...(body.metadata?.user_id == null ? {} : { cacheAffinity: body.metadata.user_id }),
    stream: body.stream ?? false
  })
}

const decodeCreateEnvelope = decoderAt(CreateMessageEnvelope)
const decodeCountEnvelope = decoderAt(CountTokensEnvelope)

/** The canonical request of a `POST /v1/messages` body; throws the 400 naming the first bad field. */
export function* messagesRequestOf(body: unknown): Sliced<CanonicalRequest> {
  const envelope = decodeCreateEnvelope(body, "")
  return yield* canonicalRequest(envelope, yield* wireMessages(envelope.messages))
}

/** The same for a count_tokens body (no `max_tokens`; one that is sent is ignored). */
export function* countTokensRequestOf(body: unknown): Sliced<CanonicalRequest> {
  const envelope = decodeCountEnvelope(body, "")
  return yield* canonicalRequest(envelope, yield* wireMessages(envelope.messages))
}
