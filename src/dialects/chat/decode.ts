/**
 * Chat Completions request → canonical request.
 *
 * Roles: `system` and `developer` become system text (hoisted to the request, in order);
 * `user` and `assistant` become turns; each `tool` message becomes a `tool_result` block, and
 * consecutive tool messages share one user turn (the canonical form has no tool role).
 * Content parts: `text`; `image_url` (a `data:` URL → base64 source, http(s) → URL source);
 * `file` with `file_data` (a PDF → document; `text/*` → text document). `input_audio`, `file_id`
 * and the legacy `function` role / `functions` field are refused with a 400 naming the field.
 */
import type { ContentBlock, DocumentBlock, ImageBlock, Message, TextBlock, ToolResultBlock } from "../../model/content.ts"
import type { Json, JsonObject } from "../../util/json.ts"
import { textBlock } from "../../model/content.ts"
import type { ReasoningSettings, ResponseFormat, ToolChoice, ToolDefinition } from "../../model/request.ts"
import { makeRequest } from "../../model/request.ts"
import type { Decoded } from "../dialect.ts"
import { parseJsonTextInSteps } from "../../util/sliced-json.ts"
import { decodeRequest, decoderAt, definedFields, discriminated, given, refuse } from "../staged-decode.ts"
import { pausesAt, type Sliced } from "../../util/slices.ts"
import type { ChatRequestWire, UserPart } from "./request-schema.ts"
import {
  AssistantPartMembers,
  ChatRequestWire as Envelope,
  MessageMembers,
  ResponseFormatMembers,
  UserPartMembers
} from "./request-schema.ts"
import { checkSingleChoice, stopSequences } from "./wire-decode.ts"
import { shown } from "../../errors.ts"

/** What the stream encoder needs from the request beyond the canonical form. */
export interface ChatEcho {
  /** `stream_options.include_usage`: a last chunk with `choices: []` and the usage. */
  readonly includeUsage: boolean
}

const decodeEnvelope = decoderAt(Envelope)
const decodeMessage = discriminated("role", MessageMembers)
const decodeUserPart = discriminated("type", UserPartMembers)
const decodeAssistantPart = discriminated("type", AssistantPartMembers)
const decodeResponseFormat = discriminated("type", ResponseFormatMembers)

/** `data:<media type>[;params];base64,<data>`. */
const DATA_URL = /^data:([^;,]+)((?:;[^;,]*)*);base64,(.*)$/s

const parseDataUrl = (url: string): { mediaType: string; data: string } | undefined => {
  const m = DATA_URL.exec(url)
  return m === null ? undefined : { mediaType: m[1].toLowerCase(), data: m[3] }
}

const imageBlock = (url: string, path: string): ImageBlock => {
  if (url.startsWith("data:")) {
    const parsed = parseDataUrl(url)
    if (parsed === undefined || !parsed.mediaType.startsWith("image/")) {
      return refuse(path, "expected a base64 data URL of an image (data:image/png;base64,…) or an http(s) URL")
    }
    return { type: "image", source: { kind: "base64", mediaType: parsed.mediaType, data: parsed.data } }
  }
  if (/^https?:\/\//i.test(url)) return { type: "image", source: { kind: "url", url } }
  return refuse(path, "expected a base64 data URL of an image or an http(s) URL")
}

type FileWire = typeof UserPartMembers.file.Type["file"]

const documentBlock = (file: FileWire, path: string): DocumentBlock => {
  const title = given(file.filename)
  const titled = (block: DocumentBlock): DocumentBlock => (title === undefined ? block : { ...block, title })
  const data = given(file.file_data)
  if (data === undefined) {
    return refuse(`${path}.file_data`, given(file.file_id) !== undefined
      ? "file_id references are not supported; send the file inline as file_data"
      : "file_data is required")
  }
  // Bare base64 is taken as a PDF, the only file type OpenAI accepts here.
  const parsed = data.startsWith("data:") ? parseDataUrl(data) : { mediaType: "application/pdf", data }
  if (parsed?.mediaType === "application/pdf") {
    return titled({ type: "document", source: { kind: "base64", mediaType: parsed.mediaType, data: parsed.data } })
  }
  if (parsed?.mediaType.startsWith("text/")) {
    const text = Buffer.from(parsed.data, "base64").toString("utf8")
    return titled({ type: "document", source: { kind: "text", mediaType: parsed.mediaType, text } })
  }
  return refuse(`${path}.file_data`, "expected a base64 data URL of a PDF (data:application/pdf;base64,…) or of a text file")
}

const userPartBlock = (part: UserPart, path: string): ContentBlock => {
  switch (part.type) {
    case "text":
      return textBlock(part.text)
    case "image_url": {
      const url = typeof part.image_url === "string" ? part.image_url : part.image_url.url
      return imageBlock(url, typeof part.image_url === "string" ? `${path}.image_url` : `${path}.image_url.url`)
    }
    case "file":
      return documentBlock(part.file, `${path}.file`)
    case "input_audio":
      return refuse(path, "input_audio parts are not supported; send text, image_url or file parts")
  }
}

const userContent = (content: string | ReadonlyArray<unknown>, path: string): Array<ContentBlock> =>
  typeof content === "string"
    ? [textBlock(content)]
    : content.map((raw, j) => userPartBlock(decodeUserPart(raw, `${path}[${j}]`), `${path}[${j}]`))

const textBlocks = (content: string | ReadonlyArray<{ readonly text: string }>): Array<TextBlock> =>
  typeof content === "string" ? [textBlock(content)] : content.map((part) => textBlock(part.text))

/**
 * Arguments are a JSON string on the wire; unparsable ones (a truncated call) are kept verbatim,
 * one nested deeper than the body may be is refused. A long one is parsed in steps the decode
 * pauses between (`parseJsonTextInSteps`).
 */
function* parseArguments(json: string, path: string): Sliced<Json> {
  const parsed = yield* parseJsonTextInSteps(json, path)
  return parsed === undefined ? json : parsed.value as Json
}

function* assistantContent(message: typeof MessageMembers.assistant.Type, path: string): Sliced<Array<ContentBlock>> {
  const blocks: Array<ContentBlock> = []
  const content = given(message.content)
  if (typeof content === "string") {
    if (content !== "") blocks.push(textBlock(content))
  } else if (content !== undefined) {
    for (const [j, raw] of content.entries()) {
      const part = decodeAssistantPart(raw, `${path}.content[${j}]`)
      blocks.push(textBlock(part.type === "text" ? part.text : part.refusal))
    }
  }
  const refusal = given(message.refusal)
  if (refusal !== undefined && refusal !== "" && blocks.length === 0) blocks.push(textBlock(refusal))
  for (const [j, call] of (given(message.tool_calls) ?? []).entries()) {
    const input = yield* parseArguments(call.function.arguments, `${path}.tool_calls[${j}].function.arguments`)
    blocks.push({ type: "tool_use", id: call.id, name: call.function.name, input })
  }
  return blocks
}

/** The turns and system text of `messages` (pausing every PAUSE_EVERY messages: see staged-decode.ts). */
function* decodeMessages(raw: ReadonlyArray<unknown>): Sliced<{ system: Array<TextBlock>; messages: Array<Message> }> {
  const system: Array<TextBlock> = []
  const messages: Array<Message> = []
  // The user turn that collects consecutive tool results, while the run lasts.
  let toolTurn: Array<ContentBlock> | undefined
  for (let i = 0; i < raw.length; i++) {
    if (i > 0 && pausesAt(i - 1)) yield
    const path = `messages[${i}]`
    const message = decodeMessage(raw[i], path)
    if (message.role !== "tool") toolTurn = undefined
    switch (message.role) {
      case "system":
      case "developer":
        system.push(...textBlocks(message.content))
        break
      case "user":
        messages.push({ role: "user", content: userContent(message.content, `${path}.content`) })
        break
      case "assistant": {
        const content = yield* assistantContent(message, path)
        if (content.length > 0) messages.push({ role: "assistant", content })
        break
      }
      case "tool": {
        const result: ToolResultBlock = {
          type: "tool_result",
          toolUseId: message.tool_call_id,
          content: typeof message.content === "string" ? message.content : textBlocks(message.content),
          isError: false
        }
        if (toolTurn === undefined) {
          toolTurn = [result]
          messages.push({ role: "user", content: toolTurn })
        } else {
          toolTurn.push(result)
        }
        break
      }
      case "function":
        return refuse(`${path}.role`, "the function role is not supported; answer tool calls with role tool")
    }
  }
  return { system, messages }
}

const toolDefinitions = (wire: ChatRequestWire): Array<ToolDefinition> =>
  (given(wire.tools) ?? []).map(({ function: fn }) => ({
    name: fn.name,
    inputSchema: (given(fn.parameters) ?? { type: "object", properties: {} }) as JsonObject,
    ...definedFields({ description: given(fn.description), strict: given(fn.strict) })
  }))

const toolChoice = (wire: ChatRequestWire, tools: ReadonlyArray<ToolDefinition>): ToolChoice => {
  const choice = given(wire.tool_choice)
  if (choice === undefined || choice === "auto") return { type: "auto" }
  if (choice === "none") return { type: "none" }
  if (choice === "required") return { type: "any" }
  const name = choice.function.name
  return tools.some((tool) => tool.name === name)
    ? { type: "tool", name }
    : refuse("tool_choice.function.name", `no tool named '${shown(name)}' is defined in tools`)
}

const responseFormat = (raw: unknown): ResponseFormat => {
  const format = decodeResponseFormat(raw, "response_format")
  if (format.type !== "json_schema") return { type: format.type }
  const spec = format.json_schema
  return {
    type: "json_schema",
    name: spec.name,
    schema: (given(spec.schema) ?? {}) as JsonObject,
    strict: spec.strict === true,
    ...definedFields({ description: given(spec.description) })
  }
}

const reasoning = (effort: ChatRequestWire["reasoning_effort"]): ReasoningSettings => {
  // Thinking blocks have no place in this dialect: reasoning, when asked for, stays hidden.
  if (effort === undefined || effort === null) return { enabled: false, visible: false }
  if (effort === "none") return { enabled: false, visible: false }
  return { enabled: true, visible: false, effort: effort === "xhigh" ? "high" : effort }
}

/** Fields the gateway cannot honor are refused rather than silently dropped. */
const refuseUnsupported = (wire: ChatRequestWire): void => {
  if (wire.logprobs === true) refuse("logprobs", "logprobs are not supported")
  if (given(wire.modalities)?.some((m) => m !== "text")) refuse("modalities", "only the text modality is supported")
  if (given(wire.functions) !== undefined) refuse("functions", "functions is not supported; use tools")
  checkSingleChoice(wire.n)
}

/** The canonical request of a Chat Completions body; throws the 400 naming the first bad field. */
function* chatRequestOf(body: unknown): Sliced<Decoded<ChatEcho>> {
  const wire = decodeEnvelope(body, "")
  refuseUnsupported(wire)
  const { system, messages } = yield* decodeMessages(wire.messages)
  const tools = toolDefinitions(wire)
  const format = given(wire.response_format)
  const request = makeRequest({
    model: wire.model,
    system,
    messages,
    tools,
    toolChoice: toolChoice(wire, tools),
    stopSequences: stopSequences(wire.stop),
    reasoning: reasoning(wire.reasoning_effort),
    responseFormat: format === undefined ? { type: "text" } : responseFormat(format),
    stream: wire.stream === true,
    metadata: given(wire.metadata) ?? {},
    ...definedFields({
      parallelToolCalls: given(wire.parallel_tool_calls),
      maxOutputTokens: given(wire.max_completion_tokens) ?? given(wire.max_tokens),
      temperature: given(wire.temperature),
      topP: given(wire.top_p),
      seed: given(wire.seed),
      user: given(wire.user),
      cacheAffinity: given(wire.prompt_cache_key) ?? given(wire.safety_identifier) ?? given(wire.user)
    })
  })
  return { request, echo: { includeUsage: wire.stream_options?.include_usage === true } }
}

export const decodeChatRequest = decodeRequest(chatRequestOf)
