/**
 * What a run sends to its model. The run's `input` is a string (one user turn) or a Messages-style
 * list of `{role, content}` (roles `user`, `assistant`, `system`; content a string or content
 * blocks), and its `tools` are tool definitions in the shape any chat endpoint takes (Messages
 * `{name, input_schema}`, Chat `{type:"function", function:{name, parameters}}`, Responses
 * `{type:"function", name, parameters}`). Both are validated at create time by the Messages
 * dialect's own decoder (400 naming `input[…]` or `tools[…]`), and decoded again from the stored
 * run at every turn. Each later turn appends, from the log, the step's answer (`node.completed`
 * `output`) and the caller's `tool.result` events for its tool calls.
 */
import { Effect } from "effect"
import { decodeCountTokens } from "../dialects/messages/index.ts"
import { InvalidRequest } from "../errors.ts"
import { prepareRequest } from "../catalog/requirements.ts"
import type { ChatModel } from "../config/schema.ts"
import type { ContentBlock, Message, OutputBlock, TextBlock, ToolResultBlock } from "../model/content.ts"
import type { CanonicalRequest } from "../model/request.ts"
import type { Json } from "../util/json.ts"
import type { LogEvent } from "./run-record.ts"

/** True when `input` can start an execution (a non-empty string or list). */
export const isUsableInput = (input: unknown) =>
  (typeof input === "string" && input.trim() !== "") || (Array.isArray(input) && input.length > 0)

const asObject = (value: unknown): Record<string, unknown> | undefined =>
  typeof value === "object" && value !== null && !Array.isArray(value) ? value as Record<string, unknown> : undefined

/** A tool in any chat endpoint's shape → the Messages shape the decoder reads. */
const messagesTool = (tool: Json): Json => {
  const object = asObject(tool)
  if (object === undefined || object.type !== "function") return tool
  const fn = asObject(object.function) ?? object
  return {
    name: fn.name as Json,
    ...(typeof fn.description === "string" ? { description: fn.description } : {}),
    input_schema: (fn.parameters ?? { type: "object", properties: {} }) as Json
  }
}

const rename = (error: InvalidRequest) => {
  const fix = (text: string) => text.replace(/^messages/, "input")
  return new InvalidRequest({ message: fix(error.message), ...(error.param === undefined ? {} : { param: fix(error.param) }) })
}

/** The run's first request: model, input as messages, tools. Fails with a 400 naming the field. */
export const baseRequest = (model: ChatModel, input: Json, tools: ReadonlyArray<Json>) =>
  Effect.gen(function*() {
    const messages = typeof input === "string" ? [{ role: "user", content: input }] : input
    const decoded = yield* decodeCountTokens({ model: model.id, messages, tools: tools.map(messagesTool) }).pipe(
      Effect.mapError((error) => error._tag === "InvalidRequest" ? rename(error) : error)
    )
    return yield* prepareRequest(model, decoded)
  })

const toolResultContent = (content: unknown): ToolResultBlock["content"] => {
  if (typeof content === "string") return content
  if (Array.isArray(content)) {
    const texts = content.filter((part): part is TextBlock => asObject(part)?.type === "text" && typeof asObject(part)?.text === "string")
    if (texts.length === content.length) return texts.map((part) => ({ type: "text", text: part.text }))
  }
  return content === undefined ? "" : JSON.stringify(content)
}

/**
 * The request of the next turn: the first request plus, for every finished step, its answer and
 * then the tool results the caller appended for it (in the order of the calls).
 */
export const turnRequest = (base: CanonicalRequest, log: ReadonlyArray<LogEvent>): CanonicalRequest => {
  const messages: Array<Message> = [...base.messages]
  const results = new Map<string, ToolResultBlock>()
  for (const event of log) {
    if (event.type === "tool.result" && typeof event.toolUseId === "string" && !results.has(event.toolUseId)) {
      results.set(event.toolUseId, { type: "tool_result", toolUseId: event.toolUseId, content: toolResultContent(event.content), isError: event.isError === true })
    }
  }
  for (const event of log) {
    if (event.type !== "node.completed" || !Array.isArray(event.output)) continue
    const output = event.output as ReadonlyArray<OutputBlock>
    messages.push({ role: "assistant", content: output })
    const answers: Array<ContentBlock> = output.flatMap((block) => block.type === "tool_use" && results.has(block.id) ? [results.get(block.id)!] : [])
    if (answers.length > 0) messages.push({ role: "user", content: answers })
  }
  return { ...base, messages }
}
