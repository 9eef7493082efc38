/**
 * The typed request options: function tools, `tool_choice` and `text.format`. Only function tools
 * exist here; a hosted tool type (web_search, file_search, …) is a 400 naming its field rather than
 * being dropped silently, so a client never believes a tool was available when it was not.
 */
import type { JsonObject } from "../../model/content.ts"
import type { ResponseFormat, ToolChoice, ToolDefinition } from "../../model/request.ts"
import { FieldError, isObject, object, optionalString, string } from "./field-error.ts"

const EMPTY_OBJECT_SCHEMA: JsonObject = { type: "object", properties: {} }

export const decodeTools = (tools: ReadonlyArray<unknown>): Array<ToolDefinition> =>
  tools.map((raw, i) => {
    const path = `tools[${i}]`
    const tool = object(raw, path)
    if (tool.type !== "function") {
      throw new FieldError(`${path}.type`, `only "function" tools are supported, not ${JSON.stringify(tool.type)}`)
    }
    const name = string(tool, "name", path)
    if (name === "") throw new FieldError(`${path}.name`, "must not be empty")
    const description = optionalString(tool, "description", path)
    const parameters = tool.parameters ?? EMPTY_OBJECT_SCHEMA
    if (!isObject(parameters)) throw new FieldError(`${path}.parameters`, "expected a JSON Schema object")
    const strict = tool.strict ?? undefined
    if (strict !== undefined && typeof strict !== "boolean") throw new FieldError(`${path}.strict`, "expected a boolean")
    return {
      name,
      inputSchema: parameters as JsonObject,
      ...(description === undefined ? {} : { description }),
      ...(strict === undefined ? {} : { strict })
    }
  })

/** `none | auto | required | {type: "function", name}`; a named tool must be among `tools`. */
export const decodeToolChoice = (raw: unknown, tools: ReadonlyArray<ToolDefinition>): ToolChoice => {
  if (raw === undefined || raw === null || raw === "auto") return { type: "auto" }
  if (raw === "none") return { type: "none" }
  if (raw === "required") return { type: "any" }
  if (!isObject(raw)) throw new FieldError("tool_choice", `expected "none", "auto", "required" or {"type": "function", "name": …}`)
  if (raw.type !== "function") throw new FieldError("tool_choice.type", `only "function" can be forced, not ${JSON.stringify(raw.type)}`)
  const name = string(raw, "name", "tool_choice")
  if (!tools.some((tool) => tool.name === name)) throw new FieldError("tool_choice.name", `no function tool named ${JSON.stringify(name)} in tools`)
  return { type: "tool", name }
}

/** `text.format`: `text`, `json_object`, or `json_schema` with `name` and `schema`. */
export const decodeFormat = (raw: unknown): ResponseFormat => {
  if (raw === undefined || raw === null) return { type: "text" }
  const path = "text.format"
  const format = object(raw, path)
  switch (format.type) {
    case "text":
      return { type: "text" }
    case "json_object":
      return { type: "json_object" }
    case "json_schema": {
      const name = string(format, "name", path)
      const schema = format.schema
      if (!isObject(schema)) throw new FieldError(`${path}.schema`, schema === undefined ? "is required" : "expected a JSON Schema object")
      const strict = format.strict ?? false
      if (typeof strict !== "boolean") throw new FieldError(`${path}.strict`, "expected a boolean")
      const description = optionalString(format, "description", path)
      return { type: "json_schema", name, schema: schema as JsonObject, strict, ...(description === undefined ? {} : { description }) }
    }
    default:
      throw new FieldError(`${path}.type`, `expected "text", "json_object" or "json_schema", not ${JSON.stringify(format.type)}`)
  }
}
