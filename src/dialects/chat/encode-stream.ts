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

export const makeChatStreamEncoder = (context: EncodeContext<ChatEcho>): StreamEncoder => new ChatStreamEncoder(context)

/**
 * One stream's encoder: its state as fields and its steps as methods shared by every stream (an
 * open stream holds this one object, not a closure per step over a shared scope).
 */
class ChatStreamEncoder implements StreamEncoder {
  readonly #context: EncodeContext<ChatEcho>
  readonly #includeUsage: boolean
  /** Tool-call position by block index; absent for text and thinking blocks. Made at the first tool call (most answers have none). */
  #toolIndexOf: Map<number, number> | undefined = undefined
  // A text delta is most of a stream's frames: its chunk is `chunk({content})` cut around the
  // text, made once per stream, so a delta costs one JSON.stringify of its text instead of a
  // seven-field object tree (~585 → ~100 bytes allocated per frame). Cut from `chunk` itself, so
  // the bytes are the same by construction; undefined when the cut is not clean (an id or model
  // holding the mark), and the delta gets the generic chunk.
  readonly #textPrefix: string | undefined
  readonly #textSuffix: string | undefined

  constructor(context: EncodeContext<ChatEcho>) {
    this.#context = context
    this.#includeUsage = context.echo.includeUsage
    const [prefix, suffix, ...rest] = this.chunk({ content: TEXT_MARK }).split(JSON.stringify(TEXT_MARK))
    const clean = rest.length === 0 && suffix !== undefined
    this.#textPrefix = clean ? prefix : undefined
    this.#textSuffix = clean ? suffix : undefined
  }

  private chunk(delta: object, finish: string | null = null): string {
    const context = this.#context
    return dataFrame({
      id: context.id,
      object: "chat.completion.chunk",
      created: context.createdAt,
      model: context.model,
      system_fingerprint: null,
      choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }],
      ...(this.#includeUsage ? { usage: null } : {})
    })
  }

  private textChunk(text: string): string {
    return this.#textSuffix === undefined ? this.chunk({ content: text }) : this.#textPrefix + JSON.stringify(text) + this.#textSuffix
  }

  event(event: CanonicalEvent): string {
    switch (event.type) {
      case "message_start":
        return this.chunk({ role: "assistant", content: "", refusal: null })
      case "block_start": {
        if (event.block.type !== "tool_use") return ""
        const toolIndexOf = (this.#toolIndexOf ??= new Map())
        toolIndexOf.set(event.index, toolIndexOf.size)
        return this.chunk({
          tool_calls: [{
            index: toolIndexOf.get(event.index),
            id: event.block.id,
            type: "function",
            function: { name: event.block.name, arguments: "" }
          }]
        })
      }
      case "text_delta":
        return event.text === "" ? "" : this.textChunk(event.text)
      case "tool_input_delta": {
        const index = this.#toolIndexOf?.get(event.index)
        if (index === undefined || event.partialJson === "") return ""
        return this.chunk({ tool_calls: [{ index, function: { arguments: event.partialJson } }] })
      }
      case "message_stop": {
        const last = this.chunk({}, finishReason(event.stopReason))
        if (!this.#includeUsage) return last + CHAT_DONE_FRAME
        const context = this.#context
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

  error(failure: StreamFailure): string {
    return errorFrame(failure)
  }

  keepalive(): string {
    return commentSignals.keepalive()
  }

  switchover(note: string): string {
    return commentSignals.switchover(note)
  }
}
