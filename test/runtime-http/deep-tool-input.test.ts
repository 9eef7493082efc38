/**
 * An upstream whose tool call carries arguments nested deeper than a request body may be
 * (`MAX_JSON_DEPTH`, 128 levels). `JSON.parse` takes any depth, but every encoder stringifies a
 * tool call's input, and `JSON.stringify` overflows the stack a few thousand levels down: such an
 * answer was a 500 on every non-streamed surface and a Responses stream cut without its end. The
 * input is now taken as `{}`, as malformed arguments are; at the limit it passes whole. Both
 * adapters, every surface, streamed and not, through the official SDKs.
 */
import Anthropic from "@anthropic-ai/sdk"
import OpenAI from "openai"
import { createServer, type Server } from "node:http"
import type { AddressInfo } from "node:net"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { isTooDeep, MAX_JSON_DEPTH } from "../../src/util/json-limits.ts"
import { createKey, gatewayOnUpstream, type TestGateway } from "./support.ts"

/** A tool input `{"a": [[…]]}` with `arrays` arrays in `a`: `arrays + 1` levels of nesting. */
const inputText = (arrays: number) => `{"a":${"[".repeat(arrays)}${"]".repeat(arrays)}}`
/** Far past the limit: deep enough to overflow `JSON.stringify` (it did at 5,000 levels, and at 100,000). */
const OVERFLOWING = 5_000

const data = (event: string | undefined, body: unknown) => `${event === undefined ? "" : `event: ${event}\n`}data: ${JSON.stringify(body)}\n\n`

/**
 * Answers every call with one tool call `f` whose arguments are `upstream.arguments`: OpenAI's
 * Chat Completions (`/v1/chat/completions`, streamed or whole) and Anthropic's Messages
 * (`/v1/messages`: streamed as `input_json_delta`, whole as a parsed `input`).
 */
const startToolUpstream = async () => {
  const state = { arguments: inputText(1) }
  const server: Server = createServer((req, res) => {
    let body = ""
    req.on("data", (part: Buffer) => (body += part)).on("end", () => {
      const stream = (JSON.parse(body) as { stream?: boolean }).stream === true
      const args = state.arguments
      if (req.url!.endsWith("/chat/completions")) {
        const call = { id: "call_1", type: "function", function: { name: "f", arguments: args } }
        if (!stream) {
          res.writeHead(200, { "content-type": "application/json" })
          res.end(JSON.stringify({
            id: "c", object: "chat.completion", created: 0, model: "m",
            choices: [{ index: 0, message: { role: "assistant", content: null, tool_calls: [call] }, finish_reason: "tool_calls" }],
            usage: { prompt_tokens: 3, completion_tokens: 5, total_tokens: 8 }
          }))
          return
        }
        const chunk = (choices: unknown, usage: unknown = null) => data(undefined, { id: "c", object: "chat.completion.chunk", created: 0, model: "m", choices, usage })
        res.writeHead(200, { "content-type": "text/event-stream" })
        res.end(
          chunk([{ index: 0, delta: { role: "assistant", tool_calls: [{ index: 0, ...call }] }, finish_reason: null }]) +
            chunk([{ index: 0, delta: {}, finish_reason: "tool_calls" }]) +
            chunk([], { prompt_tokens: 3, completion_tokens: 5, total_tokens: 8 }) +
            "data: [DONE]\n\n"
        )
        return
      }
      const message = { id: "msg_1", type: "message", role: "assistant", model: "m", stop_sequence: null }
      if (!stream) {
        res.writeHead(200, { "content-type": "application/json" })
        // The whole answer as JSON text: its `input` is the arguments' text itself, at any depth.
        res.end(`{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[{"type":"tool_use","id":"toolu_1","name":"f","input":${args}}],"stop_reason":"tool_use","stop_sequence":null,"usage":{"input_tokens":3,"output_tokens":5}}`)
        return
      }
      res.writeHead(200, { "content-type": "text/event-stream" })
      res.end(
        data("message_start", { type: "message_start", message: { ...message, content: [], stop_reason: null, usage: { input_tokens: 3, output_tokens: 1 } } }) +
          data("content_block_start", { type: "content_block_start", index: 0, content_block: { type: "tool_use", id: "toolu_1", name: "f", input: {} } }) +
          data("content_block_delta", { type: "content_block_delta", index: 0, delta: { type: "input_json_delta", partial_json: args } }) +
          data("content_block_stop", { type: "content_block_stop", index: 0 }) +
          data("message_delta", { type: "message_delta", delta: { stop_reason: "tool_use", stop_sequence: null }, usage: { output_tokens: 5 } }) +
          data("message_stop", { type: "message_stop" })
      )
    })
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    state,
    close: () => new Promise<void>((resolve) => server.close(() => resolve()))
  }
}

describe("an upstream tool call whose arguments nest deeper than a body may", () => {
  let upstream: Awaited<ReturnType<typeof startToolUpstream>>
  let gw: TestGateway
  let openai: OpenAI
  let anthropic: Anthropic
  const tool = { name: "f", description: "f", parameters: { type: "object" as const, properties: {} } }

  beforeAll(async () => {
    upstream = await startToolUpstream()
    gw = await gatewayOnUpstream(upstream.url)
    const key = (await createKey(gw)).secret
    openai = new OpenAI({ apiKey: key, baseURL: `${gw.baseUrl}/v1`, maxRetries: 0 })
    anthropic = new Anthropic({ apiKey: key, baseURL: gw.baseUrl, maxRetries: 0 })
  })
  afterAll(async () => {
    await gw?.close()
    await upstream?.close()
  })

  /** The tool call's input as each surface's SDK hands it over, streamed and not (six answers). */
  const inputsOn = async (model: string) => {
    const chatTools = [{ type: "function" as const, function: tool }]
    const chat = await openai.chat.completions.create({ model, tools: chatTools, messages: [{ role: "user", content: "go" }] })
    const chatStreamed = await openai.chat.completions.stream({ model, tools: chatTools, messages: [{ role: "user", content: "go" }] }).finalChatCompletion()
    const messagesTools = [{ name: "f", input_schema: tool.parameters }]
    const message = await anthropic.messages.create({ model, max_tokens: 4096, tools: messagesTools, messages: [{ role: "user", content: "go" }] })
    const messageStreamed = await anthropic.messages.stream({ model, max_tokens: 4096, tools: messagesTools, messages: [{ role: "user", content: "go" }] }).finalMessage()
    const responsesTools = [{ type: "function" as const, strict: false, ...tool }]
    const response = await openai.responses.create({ model, tools: responsesTools, input: "go" })
    const responseStreamed = await openai.responses.stream({ model, tools: responsesTools, input: "go" }).finalResponse()
    const chatArgs = (c: OpenAI.ChatCompletion) => {
      const call = c.choices[0]!.message.tool_calls![0]!
      return call.type === "function" ? JSON.parse(call.function.arguments) as unknown : undefined
    }
    const toolInput = (m: Anthropic.Message) => m.content.find((b) => b.type === "tool_use")?.input
    const responseArgs = (r: OpenAI.Responses.Response) => {
      const item = r.output.find((o) => o.type === "function_call")
      return item?.type === "function_call" ? JSON.parse(item.arguments) as unknown : undefined
    }
    return {
      chat: chatArgs(chat),
      chatStreamed: chatArgs(chatStreamed),
      messages: toolInput(message),
      messagesStreamed: toolInput(messageStreamed),
      responses: responseArgs(response),
      responsesStreamed: responseArgs(responseStreamed),
      stops: [chat.choices[0]!.finish_reason, message.stop_reason, messageStreamed.stop_reason, response.status, responseStreamed.status]
    }
  }

  for (const [model, backend] of [["svc-pico-1", "openai-compatible"], ["svc-lyra-3", "anthropic"]] as const) {
    it(`is answered on every surface with the call's input as {} (${backend})`, async () => {
      upstream.state.arguments = inputText(OVERFLOWING)
      const inputs = await inputsOn(model)
      expect(inputs.stops).toEqual(["tool_calls", "tool_use", "tool_use", "completed", "completed"])
      // Every answer built whole says {}. A Chat Completions or Messages stream relays the
      // arguments' text as it arrives (as it relays malformed text): its SDK assembles what the
      // upstream sent, and that stream still ends properly.
      expect([inputs.chat, inputs.messages, inputs.responses, inputs.responsesStreamed]).toEqual([{}, {}, {}, {}])
      expect(isTooDeep(inputs.chatStreamed)).toBe(true)
      expect(isTooDeep(inputs.messagesStreamed)).toBe(true)
    })

    it(`passes an input at the limit whole, and takes one a level past it as {} (${backend})`, async () => {
      // `{"a": …}` is one level; MAX_JSON_DEPTH - 1 arrays inside make the limit exactly.
      upstream.state.arguments = inputText(MAX_JSON_DEPTH - 1)
      const atLimit = JSON.parse(inputText(MAX_JSON_DEPTH - 1)) as unknown
      const at = await inputsOn(model)
      for (const input of [at.chat, at.chatStreamed, at.messages, at.messagesStreamed, at.responses, at.responsesStreamed]) expect(input).toEqual(atLimit)
      upstream.state.arguments = inputText(MAX_JSON_DEPTH)
      const past = await inputsOn(model)
      expect([past.chat, past.messages, past.responses, past.responsesStreamed]).toEqual([{}, {}, {}, {}])
    })
  }
})
