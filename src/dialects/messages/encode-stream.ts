/**
 * Canonical events → Messages SSE, exactly as `@anthropic-ai/sdk` parses it (wire-protocols.md §1):
 * every frame has an `event:` line and JSON data; `message_start` (empty content, null stop
 * reason, input usage) comes first; blocks start empty (`text: ""`, `thinking: ""`, `input: {}`);
 * `message_delta` always carries `usage` with the cumulative `output_tokens`; `message_stop` ends.
 *
 * Signature deltas are held until their block stops and sent as one `signature_delta`, because
 * the SDK replaces (not appends) the signature on each one.
 */
import type { CanonicalEvent, BlockStart } from "../../model/events.ts"
import { emptyUsage } from "../../model/usage.ts"
import { commentFrame, namedFrame } from "../../http/sse.ts"
import type { EncodeContext, StreamEncoder, StreamFailure } from "../dialect.ts"
import { messagesUsage } from "./encode-body.ts"

const emptyBlock = (block: BlockStart) => {
  switch (block.type) {
    case "text":
      return { type: "text", text: "" }
    case "thinking":
      return { type: "thinking", thinking: "", signature: "" }
    case "redacted_thinking":
      return { type: "redacted_thinking", data: block.data }
    case "tool_use":
      return { type: "tool_use", id: block.id, name: block.name, input: {} }
  }
}

const anthropicErrorTypes = new Set(["invalid_request_error", "rate_limit_error", "api_error", "overloaded_error"])

/** The SDK's error types: the backend's own when it is one of them, else derived from the status. */
const streamErrorType = (failure: StreamFailure): string =>
  anthropicErrorTypes.has(failure.type)
    ? failure.type
    : failure.status === 429
    ? "rate_limit_error"
    : failure.status === 529 || failure.status === 503
    ? "overloaded_error"
    : failure.status >= 500
    ? "api_error"
    : "invalid_request_error"

const delta = (index: number, body: Record<string, string>) =>
  namedFrame("content_block_delta", { type: "content_block_delta", index, delta: body })

/**
 * A text delta, most of a stream's frames: the same bytes as `delta(index, {type: "text_delta",
 * text})` (an integer index is written alike by JSON.stringify and a template), written without
 * building and serializing its object tree for every token.
 */
const textDelta = (index: number, text: string) =>
  Number.isSafeInteger(index)
    ? `event: content_block_delta\ndata: {"type":"content_block_delta","index":${index},"delta":{"type":"text_delta","text":${JSON.stringify(text)}}}\n\n`
    : delta(index, { type: "text_delta", text })

export const makeMessagesStreamEncoder = (context: EncodeContext<unknown>): StreamEncoder => {
  let signature = ""

  const event = (event: CanonicalEvent): string => {
    switch (event.type) {
      case "message_start":
        return namedFrame("message_start", {
          type: "message_start",
          message: {
            id: context.id,
            type: "message",
            role: "assistant",
            model: context.model,
            content: [],
            stop_reason: null,
            stop_sequence: null,
            // Output is counted on message_delta; here only what is known before generating.
            usage: { ...messagesUsage(event.usage ?? emptyUsage), output_tokens: 0 }
          }
        })
      case "block_start":
        signature = ""
        return namedFrame("content_block_start", { type: "content_block_start", index: event.index, content_block: emptyBlock(event.block) })
      case "text_delta":
        return textDelta(event.index, event.text)
      case "thinking_delta":
        return delta(event.index, { type: "thinking_delta", thinking: event.thinking })
      case "signature_delta":
        signature += event.signature
        return ""
      case "tool_input_delta":
        return delta(event.index, { type: "input_json_delta", partial_json: event.partialJson })
      case "block_stop": {
        const held = signature === "" ? "" : delta(event.index, { type: "signature_delta", signature })
        signature = ""
        return held + namedFrame("content_block_stop", { type: "content_block_stop", index: event.index })
      }
      case "message_stop":
        return namedFrame("message_delta", {
          type: "message_delta",
          delta: { stop_reason: event.stopReason, stop_sequence: event.stopSequence ?? null },
          // Cumulative totals; the SDK overwrites its snapshot with every field present.
          usage: messagesUsage(event.usage)
        }) + namedFrame("message_stop", { type: "message_stop" })
    }
  }

  return {
    event,
    error: (failure) => namedFrame("error", { type: "error", error: { type: streamErrorType(failure), message: failure.message } }),
    keepalive: () => namedFrame("ping", { type: "ping" }),
    switchover: (note) => commentFrame(note)
  }
}
