/**
 * Canonical stream events: what every backend emits and every dialect encoder consumes.
 *
 * The events mirror the Messages SSE sequence because it is the most explicit of the three wire
 * formats; Chat Completions chunks and Responses typed events are derived from the same sequence
 * (a tool_use block start becomes a `tool_calls[i]` opener or an `output_item.added` function_call;
 * `message_stop` becomes `finish_reason` or `response.completed`/`response.incomplete`).
 *
 * The contract a backend must keep:
 * 1. exactly one `message_start`, first;
 * 2. blocks are numbered 0, 1, 2… in start order and do not interleave: `block_start(i)`, its
 *    deltas, `block_stop(i)`, then the next block (backends buffer upstreams that interleave);
 * 3. deltas match their block: text_delta in text, thinking/signature_delta in thinking,
 *    tool_input_delta in tool_use; redacted_thinking blocks have no deltas;
 * 4. exactly one `message_stop`, last, with the final usage totals;
 * 5. failures are errors of the Stream, never events.
 * `eventOrderViolation` in `event-order.ts` checks a recorded sequence against this contract.
 */
import { Effect, Stream } from "effect"
import type { OutputBlock } from "./content.ts"
import type { Json } from "../util/json.ts"
import { isTooDeep } from "../util/json-limits.ts"
import type { Usage } from "./usage.ts"
import { TextPieces } from "../util/text-pieces.ts"
import { withItemAt } from "../util/arrays.ts"

export type StopReason = "end_turn" | "max_tokens" | "stop_sequence" | "tool_use" | "refusal"

/** What kind of block starts; text and thinking start empty, a tool call starts with its id. */
export type BlockStart =
  | { readonly type: "text" }
  | { readonly type: "thinking" }
  | { readonly type: "redacted_thinking"; readonly data: string }
  | { readonly type: "tool_use"; readonly id: string; readonly name: string }

interface MessageStartEvent {
  readonly type: "message_start"
  /** What served the request (the catalog id for the simulator). */
  readonly model: string
  /** Upstream message id when there is one; encoders mint their own ids regardless. */
  readonly id?: string
  /** Usage known before generation (input tokens), so Messages' message_start can report it. */
  readonly usage?: Usage
}

interface BlockStartEvent {
  readonly type: "block_start"
  readonly index: number
  readonly block: BlockStart
}

interface TextDeltaEvent {
  readonly type: "text_delta"
  readonly index: number
  readonly text: string
}

interface ThinkingDeltaEvent {
  readonly type: "thinking_delta"
  readonly index: number
  readonly thinking: string
}

interface SignatureDeltaEvent {
  readonly type: "signature_delta"
  readonly index: number
  readonly signature: string
}

/** A fragment of the tool call's arguments JSON; the fragments concatenate to the full JSON. */
interface ToolInputDeltaEvent {
  readonly type: "tool_input_delta"
  readonly index: number
  readonly partialJson: string
}

interface BlockStopEvent {
  readonly type: "block_stop"
  readonly index: number
}

interface MessageStopEvent {
  readonly type: "message_stop"
  readonly stopReason: StopReason
  /** Which stop sequence matched, when `stopReason` is `stop_sequence`. */
  readonly stopSequence?: string
  readonly usage: Usage
}

export type CanonicalEvent =
  | MessageStartEvent
  | BlockStartEvent
  | TextDeltaEvent
  | ThinkingDeltaEvent
  | SignatureDeltaEvent
  | ToolInputDeltaEvent
  | BlockStopEvent
  | MessageStopEvent

/** The whole answer, for non-streaming bodies. */
export interface CanonicalResponse {
  readonly id?: string
  readonly model: string
  readonly content: ReadonlyArray<OutputBlock>
  readonly stopReason: StopReason
  readonly stopSequence?: string
  readonly usage: Usage
}

/**
 * A block being assembled from its deltas. Its texts are `TextPieces`, not strings appended to per delta: an
 * appended string is a rope of one 32-byte node per delta, held for as long as the stream is open
 * (a Responses stream's encoder builds its answer as it goes).
 */
type OpenBlock =
  | { type: "text"; text: TextPieces }
  | { type: "thinking"; thinking: TextPieces; signature: TextPieces }
  | { type: "redacted_thinking"; data: string }
  | { type: "tool_use"; id: string; name: string; json: TextPieces }

const openBlock = (start: BlockStart): OpenBlock => {
  switch (start.type) {
    case "text":
      return { type: "text", text: new TextPieces() }
    case "thinking":
      return { type: "thinking", thinking: new TextPieces(), signature: new TextPieces() }
    case "redacted_thinking":
      return { type: "redacted_thinking", data: start.data }
    case "tool_use":
      return { type: "tool_use", id: start.id, name: start.name, json: new TextPieces() }
  }
}

/**
 * Malformed or truncated arguments (e.g. cut by max_tokens) become `{}` rather than failing, and so
 * do arguments nested deeper than a request body may be (`MAX_JSON_DEPTH`): `JSON.parse` takes any
 * depth, but every encoder stringifies the input, and `JSON.stringify` overflows the stack a few
 * thousand levels down. An upstream's output is held to the limit its input is.
 */
const parseToolInput = (json: string): Json => {
  if (json.trim() === "") return {}
  let input: Json
  try {
    input = JSON.parse(json) as Json
  } catch {
    return {}
  }
  return isTooDeep(input) ? {} : input
}

const closeBlock = (block: OpenBlock): OutputBlock => {
  switch (block.type) {
    case "text":
      return { type: "text", text: block.text.text() }
    case "thinking":
      return { type: "thinking", thinking: block.thinking.text(), signature: block.signature.text() }
    case "redacted_thinking":
      return { type: "redacted_thinking", data: block.data }
    case "tool_use":
      return { type: "tool_use", id: block.id, name: block.name, input: parseToolInput(block.json.text()) }
  }
}

/** The delta events: each adds text to its block. */
export type DeltaEvent = TextDeltaEvent | ThinkingDeltaEvent | SignatureDeltaEvent | ToolInputDeltaEvent
export type DeltaType = DeltaEvent["type"]

/**
 * Whether a block of `block`'s kind takes deltas of `delta`'s (the contract's third rule): what an
 * answer assembled from events keeps of a delta. A delta to a block not started is not kept.
 */
export const blockTakes = (block: BlockStart["type"] | undefined, delta: DeltaType): boolean => {
  switch (delta) {
    case "text_delta":
      return block === "text"
    case "thinking_delta":
    case "signature_delta":
      return block === "thinking"
    case "tool_input_delta":
      return block === "tool_use"
  }
}

/**
 * An answer as assembled so far, read-only. One call's answer is assembled once, where the
 * dispatcher delivers it (`runtime/delivered.ts`), and read there (a broken stream's usage, a
 * continuation), by the Responses encoder (a block's full text when it ends) and by a stored
 * response's record: an open stream keeps its text once, not once per reader.
 */
export interface AnswerSoFar {
  /** The block at `index` as accumulated so far. */
  block(index: number): OutputBlock | undefined
  /** The tool-call arguments JSON accumulated so far for the block at `index` (raw, unparsed). */
  toolInputJson(index: number): string | undefined
  /** Every delta of `type` the block at `index` kept, concatenated ("" when it kept none). */
  deltas(index: number, type: DeltaType): string
  /** Every text delta so far, concatenated (the text blocks in order). */
  text(): string
  /** The output's texts so far (text, thinking, tool-call arguments) in a few large parts, to count their tokens. */
  outputParts(): Array<string>
  /** The assembled response; throws if no `message_stop` was added (a backend bug). */
  finish(): CanonicalResponse
}

/**
 * Accumulates events into blocks. Encoders that must repeat a block's full content when it ends
 * (Responses `output_text.done`, `function_call_arguments.done`) read it with `block(index)`.
 */
export interface ResponseBuilder extends AnswerSoFar {
  add(event: CanonicalEvent): void
}

export const makeResponseBuilder = (): ResponseBuilder => new ResponseAssembly()

/** The builder's state as fields, its steps as methods: a Responses stream holds one for as long as it is open. */
class ResponseAssembly implements ResponseBuilder {
  #blocks: Array<OpenBlock> = []
  #start: MessageStartEvent | undefined = undefined
  #stop: MessageStopEvent | undefined = undefined

  add(event: CanonicalEvent): void {
    const blocks = this.#blocks
    switch (event.type) {
      case "message_start":
        this.#start = event
        return
      case "block_start":
        // A block starts once: a second start of the same index (against the contract) is ignored,
        // as a reader that cut deltas from this answer's texts counts on (`EventRecord`).
        if (blocks[event.index] === undefined) this.#blocks = withItemAt(blocks, event.index, openBlock(event.block))
        return
      case "text_delta":
        this.piecesOf(event.index, event.type)?.add(event.text)
        return
      case "thinking_delta":
        this.piecesOf(event.index, event.type)?.add(event.thinking)
        return
      case "signature_delta":
        this.piecesOf(event.index, event.type)?.add(event.signature)
        return
      case "tool_input_delta":
        this.piecesOf(event.index, event.type)?.add(event.partialJson)
        return
      case "block_stop":
        return
      case "message_stop":
        this.#stop = event
        return
    }
  }

  block(index: number): OutputBlock | undefined {
    const block = this.#blocks[index]
    return block === undefined ? undefined : closeBlock(block)
  }

  toolInputJson(index: number): string | undefined {
    const block = this.#blocks[index]
    return block?.type === "tool_use" ? block.json.text() : undefined
  }

  deltas(index: number, type: DeltaType): string {
    return this.piecesOf(index, type)?.text() ?? ""
  }

  text(): string {
    const texts: Array<string> = []
    for (const block of this.#blocks) if (block?.type === "text") texts.push(block.text.text())
    return texts.join("")
  }

  outputParts(): Array<string> {
    const parts: Array<string> = []
    for (const block of this.#blocks) {
      if (block?.type === "text") parts.push(...block.text.parts())
      else if (block?.type === "thinking") parts.push(...block.thinking.parts())
      else if (block?.type === "tool_use") parts.push(...block.json.parts())
    }
    return parts
  }

  /** Where the block at `index` keeps deltas of `type`, if it takes them. */
  private piecesOf(index: number, type: DeltaType): TextPieces | undefined {
    const block = this.#blocks[index]
    switch (type) {
      case "text_delta":
        return block?.type === "text" ? block.text : undefined
      case "thinking_delta":
        return block?.type === "thinking" ? block.thinking : undefined
      case "signature_delta":
        return block?.type === "thinking" ? block.signature : undefined
      case "tool_input_delta":
        return block?.type === "tool_use" ? block.json : undefined
    }
  }

  finish(): CanonicalResponse {
    const start = this.#start
    const stop = this.#stop
    if (stop === undefined) throw new Error("event stream ended without message_stop")
    return {
      ...(start?.id === undefined ? {} : { id: start.id }),
      model: start?.model ?? "",
      content: this.#blocks.filter((block) => block !== undefined).map(closeBlock),
      stopReason: stop.stopReason,
      ...(stop.stopSequence === undefined ? {} : { stopSequence: stop.stopSequence }),
      usage: stop.usage
    }
  }
}

/** Folds a complete event list into the response a non-streaming body reports. */
export const collect = (events: Iterable<CanonicalEvent>): CanonicalResponse => {
  const builder = makeResponseBuilder()
  for (const event of events) builder.add(event)
  return builder.finish()
}

/** Runs a backend stream to its end and collects it; a stream without `message_stop` is a defect. */
export const collectStream = <E, R>(events: Stream.Stream<CanonicalEvent, E, R>): Effect.Effect<CanonicalResponse, E, R> =>
  Effect.suspend(() => {
    const builder = makeResponseBuilder()
    return Stream.runForEach(events, (event) => Effect.sync(() => builder.add(event))).pipe(
      Effect.flatMap(() => Effect.sync(() => builder.finish()))
    )
  })

/**
 * The events of a whole answer, one delta per block: what a stream of it would carry at the least
 * (`collect(responseEvents(r))` gives `r` back). For hooks that watch events when the answer
 * arrived in one piece.
 */
export const responseEvents = (response: CanonicalResponse): Array<CanonicalEvent> => {
  const events: Array<CanonicalEvent> = [{ type: "message_start", model: response.model, ...(response.id === undefined ? {} : { id: response.id }) }]
  response.content.forEach((block, index) => {
    switch (block.type) {
      case "text":
        events.push({ type: "block_start", index, block: { type: "text" } })
        if (block.text !== "") events.push({ type: "text_delta", index, text: block.text })
        break
      case "thinking":
        events.push({ type: "block_start", index, block: { type: "thinking" } })
        if (block.thinking !== "") events.push({ type: "thinking_delta", index, thinking: block.thinking })
        if (block.signature !== "") events.push({ type: "signature_delta", index, signature: block.signature })
        break
      case "redacted_thinking":
        events.push({ type: "block_start", index, block: { type: "redacted_thinking", data: block.data } })
        break
      case "tool_use":
        events.push({ type: "block_start", index, block: { type: "tool_use", id: block.id, name: block.name } })
        events.push({ type: "tool_input_delta", index, partialJson: JSON.stringify(block.input) })
        break
    }
    events.push({ type: "block_stop", index })
  })
  events.push({
    type: "message_stop",
    stopReason: response.stopReason,
    ...(response.stopSequence === undefined ? {} : { stopSequence: response.stopSequence }),
    usage: response.usage
  })
  return events
}
