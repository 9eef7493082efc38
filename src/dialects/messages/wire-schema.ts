/**
 * The Messages request body as the wire carries it (snake_case), validated with Schema so that a
 * bad field answers 400 with its path, e.g. `messages[0].content[1].source.data`. Decoded in
 * stages (`../staged-decode.ts`): the envelope (messages as a list), each message, each content
 * block by its `type`.
 *
 * Lenient where clients differ and nothing is lost: unknown fields (top level and in blocks, such
 * as `cache_control` or `citations`) are ignored, `null` on an optional field means absent, and
 * `thinking.budget_tokens` may be left out. Strict where a wrong value would only fail later and
 * less clearly: block types, image media types, base64 data, numeric ranges.
 */
import { Schema } from "effect"
import { opt } from "../staged-decode.ts"

const PositiveInt = Schema.Int.check(Schema.isGreaterThanOrEqualTo(1))
const UnitInterval = Schema.Finite.check(Schema.isBetween({ minimum: 0, maximum: 1 }))
const JsonObject = Schema.Record(Schema.String, Schema.Unknown)
const HttpUrl = Schema.String.check(Schema.isPattern(/^https?:\/\/\S+$/, { expected: "an http(s) URL" }))
const Base64Data = Schema.String.check(Schema.isPattern(/^[A-Za-z0-9+/]+={0,2}$/, {
  expected: "base64-encoded bytes (no data: URL prefix, no whitespace)"
}))

const ImageMediaType = Schema.Literals(["image/jpeg", "image/png", "image/gif", "image/webp"])

const ImageSource = Schema.Union([
  Schema.Struct({ type: Schema.Literal("base64"), media_type: ImageMediaType, data: Base64Data }),
  Schema.Struct({ type: Schema.Literal("url"), url: HttpUrl })
]).annotate({ expected: "an image source of type \"base64\" or \"url\"" })

const DocumentSource = Schema.Union([
  Schema.Struct({ type: Schema.Literal("base64"), media_type: Schema.Literal("application/pdf"), data: Base64Data }),
  Schema.Struct({ type: Schema.Literal("url"), url: HttpUrl }),
  Schema.Struct({ type: Schema.Literal("text"), media_type: Schema.optional(Schema.String), data: Schema.String })
]).annotate({ expected: "a document source of type \"base64\" (PDF), \"url\" or \"text\"" })

const TextBlock = Schema.Struct({ type: Schema.Literal("text"), text: Schema.String })
const ImageBlock = Schema.Struct({ type: Schema.Literal("image"), source: ImageSource })
const DocumentBlock = Schema.Struct({ type: Schema.Literal("document"), source: DocumentSource, title: opt(Schema.String) })

const ToolResultPart = Schema.Union([TextBlock, ImageBlock, DocumentBlock])
  .annotate({ expected: "a tool_result content block of type text, image or document" })

const ToolResultBlock = Schema.Struct({
  type: Schema.Literal("tool_result"),
  tool_use_id: Schema.NonEmptyString,
  content: opt(Schema.Union([Schema.String, Schema.Array(ToolResultPart)])),
  is_error: opt(Schema.Boolean)
})

/** Content blocks by `type`, each decoded on its own (an unknown type is a 400 naming `type`). */
export const ContentBlockMembers = {
  text: TextBlock,
  image: ImageBlock,
  document: DocumentBlock,
  tool_use: Schema.Struct({ type: Schema.Literal("tool_use"), id: Schema.NonEmptyString, name: Schema.NonEmptyString, input: JsonObject }),
  tool_result: ToolResultBlock,
  thinking: Schema.Struct({ type: Schema.Literal("thinking"), thinking: Schema.String, signature: opt(Schema.String) }),
  redacted_thinking: Schema.Struct({ type: Schema.Literal("redacted_thinking"), data: Schema.String })
}
export type WireContentBlock = (typeof ContentBlockMembers)[keyof typeof ContentBlockMembers]["Type"]

/** A message with its blocks still undecoded: they are decoded one by one. */
export const MessageEnvelope = Schema.Struct({
  // `system` turns are accepted as newer SDKs allow them; their text joins the system prompt.
  role: Schema.Literals(["user", "assistant", "system"]),
  content: Schema.Union([Schema.String, Schema.Array(Schema.Unknown)])
})

export interface WireMessage {
  readonly role: typeof MessageEnvelope.Type["role"]
  readonly content: string | ReadonlyArray<WireContentBlock>
}

const Tool = Schema.Struct({
  // Server tools (web search, code execution, …) have other types and are not offered here.
  type: opt(Schema.Literal("custom")),
  name: Schema.NonEmptyString,
  description: opt(Schema.String),
  input_schema: JsonObject,
  strict: opt(Schema.Boolean)
})

const parallel = { disable_parallel_tool_use: opt(Schema.Boolean) }
const ToolChoice = Schema.Union([
  Schema.Struct({ type: Schema.Literal("auto"), ...parallel }),
  Schema.Struct({ type: Schema.Literal("any"), ...parallel }),
  Schema.Struct({ type: Schema.Literal("tool"), name: Schema.NonEmptyString, ...parallel }),
  Schema.Struct({ type: Schema.Literal("none") })
]).annotate({ expected: "a tool choice of type auto, any, tool or none" })
export type WireToolChoice = typeof ToolChoice.Type

const Thinking = Schema.Union([
  Schema.Struct({
    type: Schema.Literals(["enabled", "adaptive", "between_tools"]),
    budget_tokens: opt(PositiveInt),
    display: opt(Schema.Literals(["summarized", "omitted"]))
  }),
  Schema.Struct({ type: Schema.Literal("disabled") })
]).annotate({ expected: "a thinking setting of type enabled, adaptive or disabled" })
export type WireThinking = typeof Thinking.Type

const OutputConfig = Schema.Struct({
  effort: opt(Schema.Literals(["low", "medium", "high", "xhigh", "max"])),
  format: opt(Schema.Struct({ type: Schema.Literal("json_schema"), schema: JsonObject }))
})

/** Every field of a Messages body except `max_tokens` (count_tokens takes the same body without it). */
const commonFields = {
  model: Schema.NonEmptyString,
  messages: Schema.Array(Schema.Unknown).check(Schema.isMinLength(1)),
  system: opt(Schema.Union([Schema.String, Schema.Array(TextBlock)])),
  tools: opt(Schema.Array(Tool)),
  tool_choice: opt(ToolChoice),
  temperature: opt(UnitInterval),
  top_p: opt(UnitInterval),
  top_k: opt(Schema.Int.check(Schema.isGreaterThanOrEqualTo(0))),
  stop_sequences: opt(Schema.Array(Schema.String)),
  stream: opt(Schema.Boolean),
  thinking: opt(Thinking),
  metadata: opt(Schema.Struct({ user_id: opt(Schema.String) })),
  output_config: opt(OutputConfig)
}

/** `POST /v1/messages`, its messages still undecoded. */
export const CreateMessageEnvelope = Schema.Struct({ ...commonFields, max_tokens: PositiveInt })

/** `POST /v1/messages/count_tokens`: no `max_tokens` (ignored when sent). */
export const CountTokensEnvelope = Schema.Struct(commonFields)

/** The envelope decode works from: either body, `max_tokens` present or not. */
export type WireRequest = typeof CountTokensEnvelope.Type & { readonly max_tokens?: number }
