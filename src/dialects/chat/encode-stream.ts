/**
 * Canonical events → `chat.completion.chunk` SSE, exactly as the OpenAI SDK parses it
 * (wire-protocols.md §2):
 * - `data: {json}` frames only, never an `event:` line, ended by `data: [DONE]`;
 * - one id on every chunk; the first delta carries `role: "assistant"` and `content: ""`;
 * - tool calls: `index` (the position among tool calls, not the block index) on every fragment,
 *   `id`, `type` and `function.name` with `arguments: ""` on the first;
 * - a last content chunk with an empty delta and a non-empty `finish_reason`;
 * - with `include_usage`, `usage: null` on every earlier chunk and a final chunk with
 *   `choices: []` and the usage.
 * Thinking blocks are dropped. Keepalives and switchover notes are SSE comments.
 *
 * A failure ends the stream with `data: {"error":{…}}` and no `[DONE]`: `[DONE]` means a complete
 * answer, so a raw reader that waits for it can tell a broken stream from a finished one (the SDK
 * throws on the error chunk either way).
 */
import type { CanonicalEvent } from "../../model/events.ts"
import { commentSignals, dataFrame } from "../../http/sse.ts"
import type { EncodeContext, StreamEncoder, StreamFailure } from "../dialect.ts"
import type { ChatEcho } from "./decode.ts"
import { chatUsage, finishReason } from "./encode-body.ts"

export const CHAT_DONE_FRAME = "data: [DONE]\n\n"

/** The chunk's `error` for a failure; `type` is the spec's error type (api_error, overloaded_error, …). */
export const errorFrame = (failure: StreamFailure) =>
  dataFrame({ error: { message: failure.message, type: failure.type, param: null, code: null } })

/** Stands for a delta's text in the frame cut into a prefix and suffix (an id or model holding it gets the generic chunk). */
const TEXT_MARK = "\u0000svc-text\u0000"

export const makeChatStreamEncoder = (context: EncodeContext<ChatEcho>): StreamEncoder => {
  const includeUsage = context.echo.includeUsage
  /** Tool-call position by block index; absent for text and thinking blocks. Made at the first tool call (most answers have none). */
  let toolIndexOf: Map<number, number> | undefined

  const chunk = (delta: object, finish: string | null = null) =>
    dataFrame({
      id: context.id,
      object: "chat.completion.chunk",
      created: context.createdAt,
      model: context.model,
      system_fingerprint: null,
      choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }],
      ...(includeUsage ? { usage: null } : {})
    })

  // A text delta is most of a stream's frames: its chunk is `chunk({content})` cut around the
  // text, made once per stream, so a delta costs one JSON.stringify of its text instead of a
  // seven-field object tree (~585 → ~100 bytes allocated per frame). Cut from `chunk` itself, so
  // the bytes are the same by construction.
  const [textPrefix, textSuffix, ...rest] = chunk({ content: TEXT_MARK }).split(JSON.stringify(TEXT_MARK))
  const textChunk = rest.length === 0 && textSuffix !== undefined
    ? (text: string) => textPrefix + JSON.stringify(text) + textSuffix
    : (text: string) => chunk({ content: text })

  const event = (event: CanonicalEvent): string => {
    switch (event.type) {
      case "message_start":
        return chunk({ role: "assistant", content: "", refusal: null })
      case "block_start":
        if (event.block.type !== "tool_use") return ""
        toolIndexOf ??= new Map()
        toolIndexOf.set(event.index, toolIndexOf.size)
        return chunk({
          tool_calls: [{
            index: toolIndexOf.get(event.index),
            id: event.block.id,
            type: "function",
            function: { name: event.block.name, arguments: "" }
          }]
        })
      case "text_delta":
        return event.text === "" ? "" : textChunk(event.text)
      case "tool_input_delta": {
        const index = toolIndexOf?.get(event.index)
        if (index === undefined || event.partialJson === "") return ""
        return chunk({ tool_calls: [{ index, function: { arguments: event.partialJson } }] })
      }
      case "message_stop": {
        const last = chunk({}, finishReason(event.stopReason))
        if (!includeUsage) return last + CHAT_DONE_FRAME
        const usage = dataFrame({
          id: context.id,
          object: "chat.completion.chunk",
          created: context.createdAt,
          model: context.model,
          system_fingerprint: null,
          choices: [],
          usage: chatUsage(event.usage)
        })
        return last + usage + CHAT_DONE_FRAME
      }
      case "thinking_delta":
      case "signature_delta":
      case "block_stop":
        return ""
    }
  }

  return {
    event,
    error: errorFrame,
    ...commentSignals
  }
}
