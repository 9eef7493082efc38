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
import { type AnswerSoFar, type CanonicalEvent, makeResponseBuilder, type ResponseBuilder } from "../../model/events.ts"
import { commentFrame, namedFrame } from "../../http/sse.ts"
import { withItemAt } from "../../util/arrays.ts"
import type { EncodeContext, StreamEncoder, StreamFailure } from "../dialect.ts"
import type { ResponsesEcho } from "./decode.ts"
import { ropeOf } from "../spliced-json.ts"
import { echoFramePieces } from "./echo-json.ts"
import { encodeResponse, envelope, outputItem, outputTextPart, summaryPart } from "./envelope.ts"

/** OpenAI's `ResponseError.code` for a failure type of ours. */
const failedCode = (failure: StreamFailure) => (failure.type === "rate_limit_error" ? "rate_limit_exceeded" : "server_error")

export const makeResponsesStreamEncoder = (context: EncodeContext<ResponsesEcho>): StreamEncoder => new ResponsesStreamEncoder(context)

/**
 * One stream's encoder: its state as fields, its steps as methods shared by every stream (an open
 * stream holds this one object, not a closure per step over a shared scope).
 */
export class ResponsesStreamEncoder implements StreamEncoder {
  readonly #context: EncodeContext<ResponsesEcho>
  /**
   * The answer so far, whose blocks' texts `*.done` and `response.completed` repeat: the call's
   * own (`context.answer`, fed before each event gets here) where it keeps one, else assembled
   * here (`#own`) — an open stream keeps its text once.
   */
  readonly #answer: AnswerSoFar
  readonly #own: ResponseBuilder | undefined
  #sequence = 0
  #started = false
  #finished = false
  /**
   * The output items started so far, by block index: the item id, fixed at block start (deltas
   * must not re-assemble the block), and whether the block is closed (for a failure's partial output).
   */
  #items: Array<{ readonly id: string; closed: boolean }> = []
  /** The texts the last `event` or `error` answer is joined from, when it holds a prepared echo (see `pieces`). */
  #pieces: Array<string> | undefined = undefined

  constructor(context: EncodeContext<ResponsesEcho>) {
    this.#context = context
    if (context.answer === undefined) {
      const own = makeResponseBuilder()
      this.#own = own
      this.#answer = own
    } else {
      this.#own = undefined
      this.#answer = context.answer
    }
  }

  private frame(type: string, fields: Record<string, unknown>): string {
    return namedFrame(type, { type, sequence_number: this.#sequence++, ...fields })
  }

  /**
   * A frame holding the whole envelope, the echo's large fields put in as prepared (`echo-json.ts`):
   * one string, or (an echo of megabytes) the texts it is joined from, noted for `pieces`.
   */
  private envelopeFrame(type: string, response: { readonly instructions: unknown; readonly tools: unknown }): string {
    const pieces = this.envelopePieces(type, response)
    if (pieces.length === 1) return pieces[0]!
    const noted = (this.#pieces ??= [])
    for (const piece of pieces) noted.push(piece)
    return ropeOf(pieces)
  }

  /** The envelope's frame as the texts it is joined from (one, unless the echo was prepared). */
  private envelopePieces(type: string, response: { readonly instructions: unknown; readonly tools: unknown }): ReadonlyArray<string> {
    const made = echoFramePieces(this.#context.echo, response, (shown) => this.frame(type, { response: shown }))
    return typeof made === "string" ? [made] : made
  }

  private block(index: number): OutputBlock {
    return this.#answer.block(index)!
  }

  private scope(index: number) {
    return { item_id: this.#items[index]?.id, output_index: index }
  }

  /**
   * A text delta, most of a stream's frames: the same bytes as `frame("response.output_text.delta",
   * {...scope(index), content_index: 0, delta, logprobs: []})` (integers are written alike by
   * JSON.stringify and a template), without building and serializing its object for every token.
   */
  private textDelta(index: number, text: string): string {
    const itemId = this.#items[index]?.id
    if (typeof itemId !== "string" || !Number.isSafeInteger(index)) {
      return this.frame("response.output_text.delta", { ...this.scope(index), content_index: 0, delta: text, logprobs: [] })
    }
    return `event: response.output_text.delta\ndata: {"type":"response.output_text.delta","sequence_number":${this.#sequence++},` +
      `"item_id":${JSON.stringify(itemId)},"output_index":${index},"content_index":0,"delta":${JSON.stringify(text)},"logprobs":[]}\n\n`
  }

  private inProgress() {
    return envelope(this.#context, { status: "in_progress", output: [], usage: null })
  }

  private onStart(index: number): string {
    const current = this.block(index)
    const item = outputItem(current, this.#context.id, index)
    const id = item.id
    this.#items = withItemAt(this.#items, index, { id, closed: false })
    switch (current.type) {
      case "text":
        return this.frame("response.output_item.added", { output_index: index, item: { ...item, status: "in_progress", content: [] } }) +
          this.frame("response.content_part.added", { ...this.scope(index), content_index: 0, part: outputTextPart("") })
      case "thinking":
        return this.frame("response.output_item.added", { output_index: index, item: { id, type: "reasoning", summary: [] } }) +
          this.frame("response.reasoning_summary_part.added", { ...this.scope(index), summary_index: 0, part: summaryPart("") })
      case "redacted_thinking":
        return this.frame("response.output_item.added", { output_index: index, item: { id, type: "reasoning", summary: [] } })
      case "tool_use":
        return this.frame("response.output_item.added", { output_index: index, item: { ...item, status: "in_progress", arguments: "" } })
    }
  }

  private onStop(index: number): string {
    const started = this.#items[index]
    if (started !== undefined) started.closed = true
    const current = this.block(index)
    // The block's item, made once (each `block` joins its text again); its frame is built last, as
    // frames take their sequence number when built.
    const item = outputItem(current, this.#context.id, index)
    const done = () => this.frame("response.output_item.done", { output_index: index, item })
    switch (current.type) {
      case "text":
        return this.frame("response.output_text.done", { ...this.scope(index), content_index: 0, text: current.text, logprobs: [] }) +
          this.frame("response.content_part.done", { ...this.scope(index), content_index: 0, part: outputTextPart(current.text) }) + done()
      case "thinking":
        return this.frame("response.reasoning_summary_text.done", { ...this.scope(index), summary_index: 0, text: current.thinking }) +
          this.frame("response.reasoning_summary_part.done", { ...this.scope(index), summary_index: 0, part: summaryPart(current.thinking) }) + done()
      case "redacted_thinking":
        return done()
      case "tool_use": {
        const args = (item as { arguments: string }).arguments
        return this.frame("response.function_call_arguments.done", { ...this.scope(index), name: current.name, arguments: args }) + done()
      }
    }
  }

  private encode(event: CanonicalEvent): string {
    switch (event.type) {
      case "message_start":
        this.#started = true
        return this.envelopeFrame("response.created", this.inProgress()) + this.envelopeFrame("response.in_progress", this.inProgress())
      case "block_start":
        return this.onStart(event.index)
      case "text_delta":
        return this.textDelta(event.index, event.text)
      case "thinking_delta":
        return this.frame("response.reasoning_summary_text.delta", { ...this.scope(event.index), summary_index: 0, delta: event.thinking })
      case "signature_delta":
        // The signature only appears whole, in the item's `encrypted_content` at output_item.done.
        return ""
      case "tool_input_delta":
        return this.frame("response.function_call_arguments.delta", { ...this.scope(event.index), delta: event.partialJson })
      case "block_stop":
        return this.onStop(event.index)
      case "message_stop": {
        this.#finished = true
        const response = encodeResponse(this.#answer.finish(), this.#context)
        return this.envelopeFrame(response.status === "incomplete" ? "response.incomplete" : "response.completed", response)
      }
    }
  }

  event(event: CanonicalEvent): string {
    this.#pieces = undefined
    this.#own?.add(event)
    return this.encode(event)
  }

  pieces(): ReadonlyArray<string> | undefined {
    const pieces = this.#pieces
    this.#pieces = undefined
    return pieces
  }

  /**
   * The event's frames as `event` makes them, but `message_start`'s two envelope frames apart
   * (each may hold an echo of megabytes: joined, they could only be split again by reading all of
   * the pair), each given as the texts it is joined from (`pieces`). Each item is one frame for
   * `message_start` and `message_stop`, one or more (in one text) for others.
   */
  eventFrames(event: CanonicalEvent): ReadonlyArray<ReadonlyArray<string>> {
    if (event.type !== "message_start") {
      const text = this.event(event)
      return [this.pieces() ?? [text]]
    }
    this.#own?.add(event)
    this.#started = true
    return [this.envelopePieces("response.created", this.inProgress()), this.envelopePieces("response.in_progress", this.inProgress())]
  }

  error(failure: StreamFailure): string {
    const error = { code: failedCode(failure), message: failure.message }
    const context = this.#context
    const failed = this.#started && !this.#finished
      ? this.envelopePieces("response.failed", envelope(context, {
        status: "failed",
        output: this.#items.map((item, index) => outputItem(this.block(index), context.id, index, item.closed ? "completed" : "incomplete")),
        usage: null,
        error
      }))
      : []
    this.#finished = true
    const frames = [...failed, this.frame("error", { code: failure.type, message: failure.message, param: null })]
    this.#pieces = failed.length > 1 ? frames : undefined
    return ropeOf(frames)
  }

  keepalive(): string {
    return commentFrame("keepalive")
  }

  switchover(note: string): string {
    return commentFrame(note)
  }
}
