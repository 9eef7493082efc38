/**
 * The Chat Completions request as it arrives on the wire (the fields the gateway reads; unknown
 * fields are ignored). Messages and content parts are decoded one by one by `role` / `type`
 * (see `../staged-decode.ts`), so the envelope only checks that they are lists.
 */
import { Schema } from "effect"
import { opt } from "../staged-decode.ts"
import { JsonObjectWire, OpenAiMetadata, PositiveInt, Stop, StreamOptions, Temperature, TopP } from "./wire-decode.ts"

const TextPart = Schema.Struct({ type: Schema.Literal("text"), text: Schema.String })

/** `image_url` is an object `{url, detail}`; a bare string URL is accepted too (some clients send it). */
const ImageUrlPart = Schema.Struct({
  type: Schema.Literal("image_url"),
  image_url: Schema.Union([Schema.String, Schema.Struct({ url: Schema.String, detail: opt(Schema.String) })])
})

const FilePart = Schema.Struct({
  type: Schema.Literal("file"),
  file: Schema.Struct({ file_data: opt(Schema.String), file_id: opt(Schema.String), filename: opt(Schema.String) })
})

/** Accepted only to be refused with a clear message (the gateway has no audio input). */
const InputAudioPart = Schema.Struct({ type: Schema.Literal("input_audio") })

const RefusalPart = Schema.Struct({ type: Schema.Literal("refusal"), refusal: Schema.String })

export const UserPartMembers = { text: TextPart, image_url: ImageUrlPart, file: FilePart, input_audio: InputAudioPart }
export const AssistantPartMembers = { text: TextPart, refusal: RefusalPart }
export type UserPart = typeof TextPart.Type | typeof ImageUrlPart.Type | typeof FilePart.Type | typeof InputAudioPart.Type

const Content = Schema.Union([Schema.String, Schema.Array(Schema.Unknown)])
const TextContent = Schema.Union([Schema.String, Schema.Array(TextPart)])

const ToolCallWire = Schema.Struct({
  id: Schema.String,
  type: opt(Schema.Literal("function")),
  function: Schema.Struct({ name: Schema.String, arguments: Schema.String })
})

export const MessageMembers = {
  system: Schema.Struct({ role: Schema.Literal("system"), content: TextContent }),
  developer: Schema.Struct({ role: Schema.Literal("developer"), content: TextContent }),
  user: Schema.Struct({ role: Schema.Literal("user"), content: Content }),
  assistant: Schema.Struct({
    role: Schema.Literal("assistant"),
    content: opt(Content),
    refusal: opt(Schema.String),
    tool_calls: opt(Schema.Array(ToolCallWire))
  }),
  tool: Schema.Struct({ role: Schema.Literal("tool"), tool_call_id: Schema.String, content: TextContent }),
  /** The pre-tools `function` role: accepted only to be refused with a pointer to `tool`. */
  function: Schema.Struct({ role: Schema.Literal("function") })
}

/** OpenAI's tool name rule, which Anthropic-backed placements need too. */
const ToolName = Schema.String.check(Schema.isPattern(/^[A-Za-z0-9_-]{1,64}$/, {
  expected: "a name of 1 to 64 letters, digits, underscores or dashes"
}))

const ToolWire = Schema.Struct({
  type: Schema.Literal("function"),
  function: Schema.Struct({
    name: ToolName,
    description: opt(Schema.String),
    parameters: opt(JsonObjectWire),
    strict: opt(Schema.Boolean)
  })
})

const ToolChoiceWire = Schema.Union([
  Schema.Literals(["none", "auto", "required"]),
  Schema.Struct({ type: Schema.Literal("function"), function: Schema.Struct({ name: Schema.String }) })
])

export const ResponseFormatMembers = {
  text: Schema.Struct({ type: Schema.Literal("text") }),
  json_object: Schema.Struct({ type: Schema.Literal("json_object") }),
  json_schema: Schema.Struct({
    type: Schema.Literal("json_schema"),
    json_schema: Schema.Struct({
      name: Schema.String,
      schema: opt(JsonObjectWire),
      strict: opt(Schema.Boolean),
      description: opt(Schema.String)
    })
  })
}

/** `none` and `xhigh` (newer OpenAI values) are mapped onto the canonical four levels. */
const ReasoningEffortWire = Schema.Literals(["none", "minimal", "low", "medium", "high", "xhigh"])

export const ChatRequestWire = Schema.Struct({
  model: Schema.NonEmptyString,
  messages: Schema.Array(Schema.Unknown).check(Schema.isMinLength(1)),
  tools: opt(Schema.Array(ToolWire)),
  tool_choice: opt(ToolChoiceWire),
  parallel_tool_calls: opt(Schema.Boolean),
  max_tokens: opt(PositiveInt),
  max_completion_tokens: opt(PositiveInt),
  temperature: opt(Temperature),
  top_p: opt(TopP),
  stop: opt(Stop),
  stream: opt(Schema.Boolean),
  stream_options: opt(StreamOptions),
  response_format: opt(Schema.Unknown),
  reasoning_effort: opt(ReasoningEffortWire),
  seed: opt(Schema.Int),
  user: opt(Schema.String),
  metadata: opt(OpenAiMetadata),
  n: opt(Schema.Int),
  prompt_cache_key: opt(Schema.String),
  safety_identifier: opt(Schema.String),
  // Read only to refuse what the gateway cannot honor (see decode.ts).
  logprobs: opt(Schema.Boolean),
  modalities: opt(Schema.Array(Schema.String)),
  functions: opt(Schema.Unknown)
})
export type ChatRequestWire = typeof ChatRequestWire.Type
