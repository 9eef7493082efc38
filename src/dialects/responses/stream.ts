/**
 * Canonical events → Responses SSE: `event: <type>` frames whose data repeats `type` and carries
 * `sequence_number` 0, 1, 2 … (the SDK requires both).
 *
 *   message_start  → response.created, response.in_progress (status in_progress, output [])
 *   block (text)   → output_item.added, content_part.added, output_text.delta*, output_text.done,
 *                    content_part.done, output_item.done
 *   block (thinking) → output_item.added, reasoning_summary_part.added,
 *                    reasoning_summary_text.delta*, reasoning_summary_text.done,
 *                    reasoning_summary_part.done, output_item.done
 *   block (tool_use) → output_item.added, function_call_arguments.delta*, …arguments.done,
 *                    output_item.done
 *   message_stop   → response.completed | response.incomplete, holding `encodeResponse` of the
 *                    collected events (the SDK replaces its snapshot with it)
 *
 * One canonical block is one output item, so `output_index` is the block index and items arrive
 * at `output.length`, as the SDK checks. A failure after the start ends with `response.failed`
 * (the lifecycle closes for clients that follow it) and then `error` (what makes the SDKs throw).
 */
import type { OutputBlock } from "../../model/content.ts"
import type { CanonicalEvent } from "../../model/events.ts"
import { makeResponseBuilder } from "../../model/events.ts"
import { commentFrame, namedFrame } from "../../http/sse.ts"
import type { EncodeContext, StreamEncoder, StreamFailure } from "../dialect.ts"
import type { ResponsesEcho } from "./decode.ts"
import { encodeResponse, envelope, outputItem, outputTextPart, summaryPart } from "./envelope.ts"

/** OpenAI's `ResponseError.code` for a failure type of ours. */
const failedCode = (failure: StreamFailure) => (failure.type === "rate_limit_error" ? "rate_limit_exceeded" : "server_error")

export const makeResponsesStreamEncoder = (context: EncodeContext<ResponsesEcho>): StreamEncoder => {
  const builder = makeResponseBuilder()
  let sequence = 0
  let started = false
  let finished = false
  /** Blocks started so far, and whether each is closed (for the partial output of a failure). */
  const closed: Array<boolean> = []
  /** Item ids by block index, fixed at block start (deltas must not re-assemble the block). */
  const ids: Array<string> = []

  const frame = (type: string, fields: Record<string, unknown>) =>
    namedFrame(type, { type, sequence_number: sequence++, ...fields })

  const block = (index: number): OutputBlock => builder.block(index)!
  const item = (index: number) => outputItem(block(index), context.id, index)
  const itemIdAt = (index: number) => ids[index]
  const scope = (index: number) => ({ item_id: itemIdAt(index), output_index: index })

  /**
   * A text delta, most of a stream's frames: the same bytes as `frame("response.output_text.delta",
   * {...scope(index), content_index: 0, delta, logprobs: []})` (integers are written alike by
   * JSON.stringify and a template), without building and serializing its object for every token.
   */
  const textDelta = (index: number, text: string): string => {
    const itemId = itemIdAt(index)
    if (typeof itemId !== "string" || !Number.isSafeInteger(index)) {
      return frame("response.output_text.delta", { ...scope(index), content_index: 0, delta: text, logprobs: [] })
    }
    return `event: response.output_text.delta\ndata: {"type":"response.output_text.delta","sequence_number":${sequence++},` +
      `"item_id":${JSON.stringify(itemId)},"output_index":${index},"content_index":0,"delta":${JSON.stringify(text)},"logprobs":[]}\n\n`
  }

  const inProgress = () => envelope(context, { status: "in_progress", output: [], usage: null })

  const onStart = (index: number): string => {
    closed[index] = false
    const current = block(index)
    ids[index] = item(index).id
    switch (current.type) {
      case "text":
        return frame("response.output_item.added", { output_index: index, item: { ...item(index), status: "in_progress", content: [] } }) +
          frame("response.content_part.added", { ...scope(index), content_index: 0, part: outputTextPart("") })
      case "thinking":
        return frame("response.output_item.added", { output_index: index, item: { id: itemIdAt(index), type: "reasoning", summary: [] } }) +
          frame("response.reasoning_summary_part.added", { ...scope(index), summary_index: 0, part: summaryPart("") })
      case "redacted_thinking":
        return frame("response.output_item.added", { output_index: index, item: { id: itemIdAt(index), type: "reasoning", summary: [] } })
      case "tool_use":
        return frame("response.output_item.added", { output_index: index, item: { ...item(index), status: "in_progress", arguments: "" } })
    }
  }

  const onStop = (index: number): string => {
    closed[index] = true
    const current = block(index)
    // A function, not a value: frames take their sequence number when built, and this one is last.
    const done = () => frame("response.output_item.done", { output_index: index, item: item(index) })
    switch (current.type) {
      case "text":
        return frame("response.output_text.done", { ...scope(index), content_index: 0, text: current.text, logprobs: [] }) +
          frame("response.content_part.done", { ...scope(index), content_index: 0, part: outputTextPart(current.text) }) + done()
      case "thinking":
        return frame("response.reasoning_summary_text.done", { ...scope(index), summary_index: 0, text: current.thinking }) +
          frame("response.reasoning_summary_part.done", { ...scope(index), summary_index: 0, part: summaryPart(current.thinking) }) + done()
      case "redacted_thinking":
        return done()
      case "tool_use": {
        const args = (item(index) as { arguments: string }).arguments
        return frame("response.function_call_arguments.done", { ...scope(index), name: current.name, arguments: args }) + done()
      }
    }
  }

  const encode = (event: CanonicalEvent): string => {
    switch (event.type) {
      case "message_start":
        started = true
        return frame("response.created", { response: inProgress() }) + frame("response.in_progress", { response: inProgress() })
      case "block_start":
        return onStart(event.index)
      case "text_delta":
        return textDelta(event.index, event.text)
      case "thinking_delta":
        return frame("response.reasoning_summary_text.delta", { ...scope(event.index), summary_index: 0, delta: event.thinking })
      case "signature_delta":
        // The signature only appears whole, in the item's `encrypted_content` at output_item.done.
        return ""
      case "tool_input_delta":
        return frame("response.function_call_arguments.delta", { ...scope(event.index), delta: event.partialJson })
      case "block_stop":
        return onStop(event.index)
      case "message_stop": {
        finished = true
        const response = encodeResponse(builder.finish(), context)
        return frame(response.status === "incomplete" ? "response.incomplete" : "response.completed", { response })
      }
    }
  }

  return {
    event(event) {
      builder.add(event)
      return encode(event)
    },
    error(failure) {
      const error = { code: failedCode(failure), message: failure.message }
      const failed = started && !finished
        ? frame("response.failed", {
          response: envelope(context, {
            status: "failed",
            output: closed.map((done, index) => outputItem(block(index), context.id, index, done ? "completed" : "incomplete")),
            usage: null,
            error
          })
        })
        : ""
      finished = true
      return failed + frame("error", { code: failure.type, message: failure.message, param: null })
    },
    keepalive: () => commentFrame("keepalive"),
    switchover: (note) => commentFrame(note)
  }
}
