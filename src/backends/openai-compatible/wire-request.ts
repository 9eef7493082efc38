/**
 * Canonical request → Chat Completions wire request for an OpenAI-compatible upstream (pure).
 *
 * Choices where the two forms differ:
 * - system blocks become one `system` message (a string, or text parts when there are several);
 * - a user turn's `tool_result` blocks become `tool` messages placed first (OpenAI wants them
 *   right after the assistant's tool calls); the turn's other content, and any image or document
 *   inside a tool result, follows as a user message;
 * - thinking blocks are dropped (this wire has no place for them) and `isError` on a tool result
 *   is lost (no such flag);
 * - text documents go as text parts; PDF documents as `file` parts; document URLs are refused
 *   (OpenAI has no file-by-URL part);
 * - `max_completion_tokens` (what current OpenAI models require) carries the ceiling;
 * - `reasoning_effort` is sent only to reasoning placements; `metadata` is not sent (OpenAI
 *   refuses it without `store`); `prompt_cache_key` carries the cache affinity;
 * - streamed calls send `stream_options.include_usage`, so usage arrives on every call (a
 *   non-streamed answer always carries its usage).
 */
import type { ContentBlock, DocumentBlock, ImageBlock, Message, TextBlock } from "../../model/content.ts"
import type { CanonicalRequest, ToolChoice } from "../../model/request.ts"
import { pausesAt, runAtOnce, type Sliced } from "../../util/slices.ts"
import type { PlacementRuntime } from "../backend.ts"

/** A canonical request this wire cannot carry; the backend answers it with a 400. */
export class UnsupportedContent extends Error {}

type WirePart =
  | { type: "text"; text: string }
  | { type: "image_url"; image_url: { url: string } }
  | { type: "file"; file: { filename: string; file_data: string } }

type WireMessage = Record<string, unknown>

/**
 * Where to POST. A base URL without a path (`https://api.example.com`) gets OpenAI's `/v1`; one
 * with a path (`…/v1`, `…/openai/v1`, `…/v1beta/openai`) is used as given. A query string is kept
 * (some deployments carry an API version there).
 */
export const chatCompletionsTarget = (baseUrl: string): ChatCompletionsTarget => {
  const known = targets.get(baseUrl)
  if (known !== undefined) return known
  const url = new URL(baseUrl)
  const base = url.pathname.replace(/\/+$/, "")
  const target = { origin: url.origin, path: `${base === "" ? "/v1" : base}/chat/completions${url.search}` }
  if (targets.size >= MAX_TARGETS) targets.clear()
  targets.set(baseUrl, target)
  return target
}

/** Where a base URL's chat completions are POSTed: the pool's origin and the request's path. */
interface ChatCompletionsTarget {
  readonly origin: string
  readonly path: string
}

/**
 * Targets by base URL: a catalog has a handful, and parsing one (`new URL`) was ~8 µs of every
 * call in a perf profile of the request path. Bounded for catalogs reloaded with ever new URLs.
 */
const targets = new Map<string, ChatCompletionsTarget>()
const MAX_TARGETS = 1_024

const imagePart = (block: ImageBlock): WirePart => ({
  type: "image_url",
  image_url: { url: block.source.kind === "base64" ? `data:${block.source.mediaType};base64,${block.source.data}` : block.source.url }
})

const documentPart = (block: DocumentBlock): WirePart => {
  const source = block.source
  switch (source.kind) {
    case "base64":
      return { type: "file", file: { filename: block.title ?? "document.pdf", file_data: `data:${source.mediaType};base64,${source.data}` } }
    case "text":
      return { type: "text", text: block.title === undefined ? source.text : `${block.title}\n\n${source.text}` }
    case "url":
      throw new UnsupportedContent("documents by URL are not supported by this model's upstream; send the PDF inline")
  }
}

const userPart = (block: ContentBlock): WirePart | undefined => {
  switch (block.type) {
    case "text":
      return { type: "text", text: block.text }
    case "image":
      return imagePart(block)
    case "document":
      return documentPart(block)
    default:
      return undefined
  }
}

/** One text part travels as a plain string (the form every compatible server accepts). */
const partsOrString = (parts: ReadonlyArray<WirePart>): string | ReadonlyArray<WirePart> =>
  parts.length === 1 && parts[0].type === "text" ? parts[0].text : parts

const userMessages = (message: Message): Array<WireMessage> => {
  const out: Array<WireMessage> = []
  const parts: Array<WirePart> = []
  for (const block of message.content) {
    if (block.type !== "tool_result") {
      const part = userPart(block)
      if (part !== undefined) parts.push(part)
      continue
    }
    if (typeof block.content === "string") {
      out.push({ role: "tool", tool_call_id: block.toolUseId, content: block.content })
      continue
    }
    const texts = block.content.filter((part): part is TextBlock => part.type === "text")
    out.push({ role: "tool", tool_call_id: block.toolUseId, content: texts.map((part) => ({ type: "text", text: part.text })) })
    for (const part of block.content) if (part.type !== "text") parts.push(userPart(part)!)
  }
  if (parts.length > 0) out.push({ role: "user", content: partsOrString(parts) })
  return out
}

/**
 * The `arguments` text of tool calls whose input's JSON was made beforehand (in slices, by the
 * caller: `largeToolInputs`), by input; any other input is `JSON.stringify`d here.
 */
export type MadeArguments = ReadonlyMap<object, string>
const NONE_MADE: MadeArguments = new Map()

const argumentsOf = (input: unknown, made: MadeArguments): string =>
  typeof input === "string" ? input : (typeof input === "object" && input !== null ? made.get(input) : undefined) ?? JSON.stringify(input)

/** The tool-call inputs of `request`'s assistant turns that pass `isLarge` (whose JSON should be made in slices). */
export function* largeToolInputs(request: CanonicalRequest, isLarge: (value: unknown) => boolean): Sliced<Array<object>> {
  const large: Array<object> = []
  for (let i = 0; i < request.messages.length; i++) {
    const message = request.messages[i]
    if (pausesAt(i)) yield
    if (message.role !== "assistant") continue
    for (const block of message.content) {
      if (block.type === "tool_use" && typeof block.input === "object" && block.input !== null && isLarge(block.input)) large.push(block.input)
    }
  }
  return large
}

const assistantMessage = (message: Message, made: MadeArguments): WireMessage => {
  const text = message.content.map((block) => (block.type === "text" ? block.text : "")).join("")
  const calls = message.content.flatMap((block) =>
    block.type === "tool_use"
      ? [{ id: block.id, type: "function", function: { name: block.name, arguments: argumentsOf(block.input, made) } }]
      : []
  )
  return calls.length === 0 ? { role: "assistant", content: text } : { role: "assistant", content: text === "" ? null : text, tool_calls: calls }
}

const systemMessages = (system: ReadonlyArray<TextBlock>): Array<WireMessage> =>
  system.length === 0
    ? []
    : [{ role: "system", content: system.length === 1 ? system[0].text : system.map((block) => ({ type: "text", text: block.text })) }]

const toolChoice = (choice: ToolChoice) => {
  switch (choice.type) {
    case "auto":
      return "auto"
    case "any":
      return "required"
    case "none":
      return "none"
    case "tool":
      return { type: "function", function: { name: choice.name } }
  }
}

const toolFields = (request: CanonicalRequest) => {
  // OpenAI refuses tool_choice and parallel_tool_calls when no tools are sent.
  if (request.tools.length === 0) return {}
  return {
    tools: request.tools.map((tool) => ({
      type: "function",
      function: {
        name: tool.name,
        ...(tool.description === undefined ? {} : { description: tool.description }),
        parameters: tool.inputSchema,
        ...(tool.strict === undefined ? {} : { strict: tool.strict })
      }
    })),
    tool_choice: toolChoice(request.toolChoice),
    ...(request.parallelToolCalls === undefined ? {} : { parallel_tool_calls: request.parallelToolCalls })
  }
}

const responseFormat = (request: CanonicalRequest) => {
  const format = request.responseFormat
  if (format.type === "text") return {}
  if (format.type === "json_object") return { response_format: { type: "json_object" } }
  return {
    response_format: {
      type: "json_schema",
      json_schema: {
        name: format.name,
        schema: format.schema,
        strict: format.strict,
        ...(format.description === undefined ? {} : { description: format.description })
      }
    }
  }
}

/**
 * The wire body, with a pause every few messages (a request of 16,000 messages is milliseconds of
 * translating); throws `UnsupportedContent` for content the wire cannot carry.
 */
export function* wireRequest(request: CanonicalRequest, placement: PlacementRuntime, stream = true, made: MadeArguments = NONE_MADE): Sliced<Record<string, unknown>> {
  const messages = systemMessages(request.system)
  for (let i = 0; i < request.messages.length; i++) {
    const message = request.messages[i]
    if (message.role === "user") messages.push(...userMessages(message))
    else messages.push(assistantMessage(message, made))
    if (pausesAt(i)) yield
  }
  const effort = placement.reasoning && request.reasoning.enabled ? request.reasoning.effort : undefined
  const optional: Record<string, unknown> = {
    max_completion_tokens: request.maxOutputTokens,
    temperature: request.temperature,
    top_p: request.topP,
    seed: request.seed,
    stop: request.stopSequences.length > 0 ? request.stopSequences : undefined,
    reasoning_effort: effort,
    user: request.user,
    prompt_cache_key: request.cacheAffinity
  }
  const body: Record<string, unknown> = { model: placement.upstreamModel, messages, ...toolFields(request), ...responseFormat(request) }
  for (const name in optional) if (optional[name] !== undefined) body[name] = optional[name]
  if (stream) {
    body.stream = true
    body.stream_options = { include_usage: true }
  } else body.stream = false
  return body
}

/** `wireRequest` at once (a caller that cannot pause; tests). */
export const toWireRequest = (request: CanonicalRequest, placement: PlacementRuntime, stream = true, made: MadeArguments = NONE_MADE): Record<string, unknown> =>
  runAtOnce(wireRequest(request, placement, stream, made))
