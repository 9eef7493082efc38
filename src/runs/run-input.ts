/**
 * What a run sends to its model. The run's `input` is a string (one user turn) or a Messages-style
 * list of `{role, content}` (roles `user`, `assistant`, `system`; content a string or content
 * blocks), and its `tools` are tool definitions in the shape any chat endpoint takes (Messages
 * `{name, input_schema}`, Chat `{type:"function", function:{name, parameters}}`, Responses
 * `{type:"function", name, parameters}`). Both are validated at create time by the Messages
 * dialect's own decoder (400 naming `input[…]` or `tools[…]`), and decoded again from the stored
 * run once per actor (src/runs/run-actor.ts). Each later turn appends the step's answer
 * (`node.completed` `output`) and the caller's `tool.result` events for its tool calls: the actor
 * keeps them in a `Conversation`, fed with each log event once, in log order.
 */
import { Effect } from "effect"
import { decodeCountTokens } from "../dialects/messages/index.ts"
import { InvalidRequest } from "../errors.ts"
import { prepareRequest } from "../catalog/requirements.ts"
import type { ChatModel } from "../config/schema.ts"
import type { ContentBlock, Message, OutputBlock, TextBlock, ToolResultBlock } from "../model/content.ts"
import type { CanonicalRequest } from "../model/request.ts"
import { isPlainObject, type Json } from "../util/json.ts"
import { isBlank } from "../util/long-strings.ts"
import type { LogEvent } from "./run-record.ts"

/** True when `input` can start an execution (a non-empty string or list). */
export const isUsableInput = (input: unknown) =>
  (typeof input === "string" && !isBlank(input)) || (Array.isArray(input) && input.length > 0)

const asObject = (value: unknown) => (isPlainObject(value) ? value : undefined)

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
export const baseRequest = Effect.fnUntraced(function*(model: ChatModel, input: Json, tools: ReadonlyArray<Json>) {
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
 * The part of the conversation the log adds to the first request: every finished step's answer,
 * then the tool results the caller appended for it (in the order of the calls; the first result
 * for a call counts). Fed one event at a time, so a run's actor never re-reads its log.
 */
export interface Conversation {
  /** Takes the next log event (those that are not answers or tool results are ignored). */
  add(event: LogEvent): void
  /** The request of the next turn: `base` plus every answer and its tool results so far. */
  request(base: CanonicalRequest): CanonicalRequest
  /** The last step's answer (what the outcome's `text` is made of), if a step finished. */
  lastOutput(): ReadonlyArray<OutputBlock> | undefined
}

export const makeConversation = (): Conversation => {
  const answers: Array<ReadonlyArray<OutputBlock>> = []
  const results = new Map<string, ToolResultBlock>()
  return {
    add: (event) => {
      if (event.type === "tool.result" && typeof event.toolUseId === "string" && !results.has(event.toolUseId)) {
        results.set(event.toolUseId, { type: "tool_result", toolUseId: event.toolUseId, content: toolResultContent(event.content), isError: event.isError === true })
      } else if (event.type === "node.completed" && Array.isArray(event.output)) {
        answers.push(event.output as ReadonlyArray<OutputBlock>)
      }
    },
    request: (base) => {
      const messages: Array<Message> = [...base.messages]
      for (const output of answers) {
        messages.push({ role: "assistant", content: output })
        const answered: Array<ContentBlock> = []
        for (const block of output) {
          const result = block.type === "tool_use" ? results.get(block.id) : undefined
          if (result !== undefined) answered.push(result)
        }
        if (answered.length > 0) messages.push({ role: "user", content: answered })
      }
      return { ...base, messages }
    },
    lastOutput: () => answers[answers.length - 1]
  }
}
