/**
 * The typed request options: function tools, `tool_choice` and `text.format`, each decoded on its
 * own (the envelope keeps them as sent, for the echo). Only function tools exist here; a hosted
 * tool type (web_search, file_search, …) is a 400 naming its field rather than being dropped
 * silently, so a client never believes a tool was available when it was not.
 */
import { Schema } from "effect"
import type { JsonObject } from "../../util/json.ts"
import type { ResponseFormat, ToolChoice, ToolDefinition } from "../../model/request.ts"
import { decoderAt, definedFields, discriminated, given, opt, refuse } from "../staged-decode.ts"
import { shown } from "../../errors.ts"

const EMPTY_OBJECT_SCHEMA: JsonObject = { type: "object", properties: {} }

const JsonSchemaObject = Schema.Record(Schema.String, Schema.Unknown)

const FunctionTool = Schema.Struct({
  type: Schema.Literal("function"),
  name: Schema.NonEmptyString,
  description: opt(Schema.String),
  parameters: opt(JsonSchemaObject),
  strict: opt(Schema.Boolean)
})

const ToolChoiceMode = Schema.Literals(["none", "auto", "required"])
const ForcedFunction = Schema.Struct({ type: Schema.Literal("function"), name: Schema.String })

const FormatMembers = {
  text: Schema.Struct({ type: Schema.Literal("text") }),
  json_object: Schema.Struct({ type: Schema.Literal("json_object") }),
  json_schema: Schema.Struct({
    type: Schema.Literal("json_schema"),
    name: Schema.String,
    schema: JsonSchemaObject,
    strict: opt(Schema.Boolean),
    description: opt(Schema.String)
  })
}

const decodeTool = decoderAt(FunctionTool)
const decodeToolChoiceMode = decoderAt(ToolChoiceMode)
const decodeForcedFunction = decoderAt(ForcedFunction)
const decodeFormatMember = discriminated("type", FormatMembers)

export const decodeTools = (tools: ReadonlyArray<unknown>): Array<ToolDefinition> =>
  tools.map((raw, i) => {
    const tool = decodeTool(raw, `tools[${i}]`)
    return {
      name: tool.name,
      inputSchema: (given(tool.parameters) ?? EMPTY_OBJECT_SCHEMA) as JsonObject,
      ...definedFields({ description: given(tool.description), strict: given(tool.strict) })
    }
  })

/** `none | auto | required | {type: "function", name}`; a named tool must be among `tools`. */
export const decodeToolChoice = (raw: unknown, tools: ReadonlyArray<ToolDefinition>): ToolChoice => {
  if (raw === undefined || raw === null) return { type: "auto" }
  if (typeof raw !== "object") {
    const mode = decodeToolChoiceMode(raw, "tool_choice")
    return mode === "required" ? { type: "any" } : { type: mode }
  }
  const { name } = decodeForcedFunction(raw, "tool_choice")
  if (!tools.some((tool) => tool.name === name)) refuse("tool_choice.name", `no function tool named ${JSON.stringify(shown(name))} in tools`)
  return { type: "tool", name }
}

/** `text.format`: `text`, `json_object`, or `json_schema` with `name` and `schema`. */
export const decodeFormat = (raw: unknown): ResponseFormat => {
  if (raw === undefined || raw === null) return { type: "text" }
  const format = decodeFormatMember(raw, "text.format")
  if (format.type !== "json_schema") return { type: format.type }
  return {
    type: "json_schema",
    name: format.name,
    schema: format.schema as JsonObject,
    strict: format.strict ?? false,
    ...definedFields({ description: given(format.description) })
  }
}
