/** Shared helpers of the Responses dialect unit tests: decoding, contexts and event scripts. */
import { Effect, Result } from "effect"
import type { EncodeContext } from "../../../src/dialects/dialect.ts"
import { responsesDialect, type ResponsesEcho } from "../../../src/dialects/responses/index.ts"
import type { CanonicalEvent, StopReason } from "../../../src/model/events.ts"
import { makeUsage } from "../../../src/model/usage.ts"

export const decodeOk = (body: unknown) => Effect.runSync(responsesDialect.decode(body))

/** The 400 a body fails with (message and param), or a test failure if it decodes. */
export const decodeError = (body: unknown) => {
  const result = Effect.runSync(Effect.result(responsesDialect.decode(body)))
  if (Result.isSuccess(result)) throw new Error(`expected a 400 for ${JSON.stringify(body)}`)
  return result.failure
}

export const contextFor = (body: Record<string, unknown> = {}): EncodeContext<ResponsesEcho> => {
  const decoded = decodeOk({ model: "svc-atlas-1", input: "hi", ...body })
  return { id: "resp_TEST", model: "svc-atlas-1", createdAt: 1_700_000_000, request: decoded.request, echo: decoded.echo }
}

export const usage = makeUsage({ inputTokens: 12, cachedInputTokens: 4, outputTokens: 30, reasoningTokens: 10 })

/** A backend-shaped event list: thinking, text in two deltas, a tool call, then the stop. */
export const fullScript = (stopReason: StopReason = "tool_use"): Array<CanonicalEvent> => [
  { type: "message_start", model: "svc-atlas-1", usage: makeUsage({ inputTokens: 12 }) },
  { type: "block_start", index: 0, block: { type: "thinking" } },
  { type: "thinking_delta", index: 0, thinking: "Let me " },
  { type: "thinking_delta", index: 0, thinking: "think." },
  { type: "signature_delta", index: 0, signature: "c2lnbmF0dXJl" },
  { type: "block_stop", index: 0 },
  { type: "block_start", index: 1, block: { type: "text" } },
  { type: "text_delta", index: 1, text: "Hello " },
  { type: "text_delta", index: 1, text: "world" },
  { type: "block_stop", index: 1 },
  { type: "block_start", index: 2, block: { type: "tool_use", id: "toolu_abc", name: "get_weather" } },
  { type: "tool_input_delta", index: 2, partialJson: "{\"city\":" },
  { type: "tool_input_delta", index: 2, partialJson: "\"Paris\"}" },
  { type: "block_stop", index: 2 },
  { type: "message_stop", stopReason, usage }
]

/** Parses SSE text into frames, checking each has an `event:` line that matches its data's type. */
export const parseSse = (text: string) =>
  text.split("\n\n").filter((chunk) => chunk.trim() !== "" && !chunk.startsWith(":")).map((chunk) => {
    const event = /^event: (.+)$/m.exec(chunk)?.[1]
    const data = JSON.parse(/^data: (.+)$/m.exec(chunk)![1])
    if (event !== data.type) throw new Error(`event name ${event} does not match data type ${data.type}`)
    return data
  })
