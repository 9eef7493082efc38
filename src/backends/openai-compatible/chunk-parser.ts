/**
 * Upstream `chat.completion.chunk` payloads → canonical events (pure, incremental), keeping the
 * backend contract of `model/events.ts`:
 * - `message_start` on the first chunk, naming the catalog model (never the upstream's name);
 * - blocks never interleave: text streams into a text block; a tool call's first fragment closes
 *   whatever block is open and opens the call's block, later fragments stream into it. A call
 *   whose name has not arrived yet is held back until it does — at most `MAX_UNNAMED_CALLS` such
 *   calls holding `MAX_UNNAMED_ARGS_CHARS` of arguments, else the stream fails (an upstream that
 *   never names its calls was kept in memory without end, and nothing reached the client to stop
 *   it). A fragment for a call that was already closed (an upstream that interleaves calls)
 *   cannot be placed and fails the stream;
 * - reasoning text (`reasoning_content` / `reasoning`, sent by several compatible servers) becomes
 *   a thinking block when the request asked for visible reasoning, else it is dropped;
 * - `message_stop` at `[DONE]` (or at the end of the body after a `finish_reason`) with the usage
 *   chunk's totals; when the upstream sent no usage, its usage is zero and `unreported` holds the
 *   generated text, for the backend to count with the tokenizer (so metering never settles a call
 *   at zero) — the parser stays synchronous and never tokenizes. The text is kept only until the
 *   upstream shows it will send usage: with `include_usage` (which the backend always asks for),
 *   OpenAI puts `usage: null` on every chunk before the usage chunk. From then on only the text's
 *   UTF-8 size is kept, an upper bound on its tokens, for an upstream that then sends none after
 *   all (`unreported.atMostTokens`): charged at most that, never zero, and no text held per open
 *   stream for the upstreams that keep their word.
 * Failures are thrown as `BackendError`: an `{"error":…}` chunk, invalid JSON, a body that ends
 * before `finish_reason` or `[DONE]`.
 */
import { randomBytes } from "node:crypto"
import type { CanonicalEvent, StopReason } from "../../model/events.ts"
import type { Usage } from "../../model/usage.ts"
import { makeUsage, reportedTokens } from "../../model/usage.ts"
import type { BackendError } from "../backend.ts"
import { backendErrorFromStatus } from "../backend.ts"
import { TextPieces } from "../../util/text-pieces.ts"
import { eventTooLarge, MAX_ANSWER_BLOCKS, MAX_EVENT_VALUES, MAX_TOOL_INPUT_CHARS, tooManyBlocks, toolInputTooLong } from "../upstream/upstream.ts"
import { holdsMoreValues } from "../../util/json-limits.ts"

export interface ChunkParserOptions {
  /** Catalog id reported in `message_start`. */
  readonly modelId: string
  /** Surface upstream reasoning text as thinking blocks. */
  readonly visibleReasoning: boolean
}

/**
 * Each step appends the events it completes to `out` (a new array when none is given) and returns
 * it: a stream's reads collect one array of events each, not one per step and another to join them.
 */
export interface ChunkParser {
  /** One `data:` payload. Throws `BackendError`. */
  push(data: string, out?: Array<CanonicalEvent>): Array<CanonicalEvent>
  /** One chunk already parsed from JSON (a non-streamed completion, see `completionAsChunk`). */
  pushChunk(chunk: unknown, out?: Array<CanonicalEvent>): Array<CanonicalEvent>
  /** The body ended. Throws `BackendError` when the answer was cut short. */
  end(out?: Array<CanonicalEvent>): Array<CanonicalEvent>
  /** Once `message_stop` went out without upstream usage: what to count its output from. */
  readonly unreported: Unreported | undefined
}

/**
 * What the parser kept of an answer whose upstream sent no usage: the text generated (to count with
 * the tokenizer), or, where the upstream had promised usage (`usage: null` on its chunks) and the
 * text was not kept, its UTF-8 size — no tokenizer counts more tokens than a text has bytes.
 */
export type Unreported = { readonly generated: string } | { readonly atMostTokens: number }

interface ToolCallState {
  id: string | undefined
  name: string | undefined
  args: string
  /** Its arguments' length so far (what `args` held, and what went out since it was opened). */
  chars: number
  state: "pending" | "open" | "closed"
  block: number
}

type Open = { readonly kind: "text" | "thinking"; readonly block: number } | { readonly kind: "tool"; readonly call: ToolCallState }

const broken = (message: string) => backendErrorFromStatus(502, message)

/** The most tool calls held back for their name at once, and the most argument text they may hold. */
export const MAX_UNNAMED_CALLS = 1_024
export const MAX_UNNAMED_ARGS_CHARS = 1024 * 1024

/**
 * A JSON object from the upstream, read field by field: every field is `unknown` until checked,
 * and anything that is not an object reads as one without fields.
 */
type Wire = { readonly [field: string]: unknown }
const wire = (value: unknown): Wire => (value !== null && typeof value === "object" ? value as Wire : {})
const text = (value: unknown): string | undefined => (typeof value === "string" ? value : undefined)

/** An `{"error":{…}}` chunk, classified by its type so retry rules apply sensibly. */
const upstreamStreamError = (error: { message?: unknown; type?: unknown; code?: unknown }): BackendError => {
  const message = typeof error.message === "string" ? error.message : "the upstream reported an error mid-stream"
  const kind = `${String(error.type ?? "")} ${String(error.code ?? "")}`
  const status = /invalid_request/.test(kind) ? 400 : /rate_limit/.test(kind) ? 429 : /overloaded/.test(kind) ? 503 : 502
  return backendErrorFromStatus(status, message)
}

const stopReasonOf = (finish: string | undefined, sawTools: boolean, refused: boolean): StopReason => {
  switch (finish) {
    case "length":
      return "max_tokens"
    case "tool_calls":
    case "function_call":
      return "tool_use"
    case "content_filter":
      return "refusal"
    default:
      // Some servers finish a tool-call turn with "stop"; a refusal arrives with "stop" too.
      return refused ? "refusal" : sawTools ? "tool_use" : "end_turn"
  }
}

const usageOf = (usage: Wire): Usage =>
  makeUsage({
    inputTokens: reportedTokens(usage.prompt_tokens),
    outputTokens: reportedTokens(usage.completion_tokens),
    cachedInputTokens: reportedTokens(wire(usage.prompt_tokens_details).cached_tokens),
    reasoningTokens: reportedTokens(wire(usage.completion_tokens_details).reasoning_tokens)
  })

/**
 * The parser's state as fields and its steps as methods shared by every parser: one is made per
 * upstream call and an open stream holds it, so not a closure per step over a shared scope.
 */
class ChunkParserImpl implements ChunkParser {
  private readonly options: ChunkParserOptions
  private started = false
  private finished = false
  private nextBlock = 0
  private open: Open | undefined
  // Made at the first tool-call fragment (most answers have none).
  private calls: Map<number, ToolCallState> | undefined
  // Calls held back for their name, and the argument text they hold.
  private unnamedCalls = 0
  private unnamedChars = 0
  private finish: string | undefined
  private usage: Usage | undefined
  private refused = false
  // The generated text, read only if the upstream reports no usage (see `unreported`): a string
  // appended to per delta is a rope of one 32-byte node per token for the whole stream.
  private readonly generated = new TextPieces()
  // Set once the upstream showed it will report usage: from then on only the text's UTF-8 size is kept.
  private usagePromised = false
  private generatedBytes = 0
  unreported: Unreported | undefined

  constructor(options: ChunkParserOptions) {
    this.options = options
  }

  private close(events: Array<CanonicalEvent>) {
    const open = this.open
    if (open === undefined) return
    if (open.kind === "tool") {
      open.call.state = "closed"
      events.push({ type: "block_stop", index: open.call.block })
    } else {
      events.push({ type: "block_stop", index: open.block })
    }
    this.open = undefined
  }

  private appendText(kind: "text" | "thinking", text: string, events: Array<CanonicalEvent>) {
    if (this.open?.kind !== kind) {
      this.close(events)
      if (this.nextBlock >= MAX_ANSWER_BLOCKS) throw tooManyBlocks()
      const block = this.nextBlock++
      this.open = { kind, block }
      events.push({ type: "block_start", index: block, block: { type: kind } })
    }
    const index = this.nextBlock - 1
    this.keep(text)
    events.push(kind === "text" ? { type: "text_delta", index, text } : { type: "thinking_delta", index, thinking: text })
  }

  /** Keeps generated text for an upstream that may send no usage (see `unreported`). */
  private keep(text: string) {
    if (this.usagePromised) this.generatedBytes += Buffer.byteLength(text)
    else this.generated.add(text)
  }

  /** The upstream showed it will send usage: the text kept so far becomes its size. */
  private promiseUsage() {
    this.usagePromised = true
    for (const part of this.generated.parts()) this.generatedBytes += Buffer.byteLength(part)
    this.generated.clear()
  }

  private openCall(call: ToolCallState, events: Array<CanonicalEvent>) {
    this.unnamedCalls--
    this.unnamedChars -= call.args.length
    this.close(events)
    if (this.nextBlock >= MAX_ANSWER_BLOCKS) throw tooManyBlocks()
    call.state = "open"
    call.block = this.nextBlock++
    call.id ??= `call_${randomBytes(12).toString("hex")}`
    this.open = { kind: "tool", call }
    events.push({ type: "block_start", index: call.block, block: { type: "tool_use", id: call.id, name: call.name! } })
    if (call.args !== "") events.push({ type: "tool_input_delta", index: call.block, partialJson: call.args })
  }

  private toolFragment(fragment: Wire, position: number, events: Array<CanonicalEvent>) {
    const key = typeof fragment.index === "number" ? fragment.index : position
    const calls = (this.calls ??= new Map())
    let call = calls.get(key)
    if (call === undefined) {
      if (this.unnamedCalls >= MAX_UNNAMED_CALLS) throw broken(`the upstream started more than ${MAX_UNNAMED_CALLS} tool calls without their names`)
      call = { id: undefined, name: undefined, args: "", chars: 0, state: "pending", block: -1 }
      calls.set(key, call)
      this.unnamedCalls++
    }
    const id = text(fragment.id)
    if (id !== undefined && id !== "") call.id ??= id
    const fn = wire(fragment.function)
    const name = text(fn.name)
    if (name !== undefined && name !== "") call.name ??= name
    const args = text(fn.arguments) ?? ""
    call.chars += args.length
    if (call.chars > MAX_TOOL_INPUT_CHARS) throw toolInputTooLong()
    if (args !== "") this.keep(args)
    if (call.state === "closed") throw broken("the upstream interleaved the fragments of several tool calls")
    if (call.state === "open") {
      if (args !== "") events.push({ type: "tool_input_delta", index: call.block, partialJson: args })
      return
    }
    call.args += args
    this.unnamedChars += args.length
    // A fragment that names its call opens it, however long its arguments (a whole answer's call
    // comes as one fragment): only arguments still waiting for their name are bounded.
    if (call.name !== undefined) return this.openCall(call, events)
    if (this.unnamedChars > MAX_UNNAMED_ARGS_CHARS) throw broken(`the upstream sent more than ${MAX_UNNAMED_ARGS_CHARS} characters of tool-call arguments without the call's name`)
  }

  private stop(events: Array<CanonicalEvent>): Array<CanonicalEvent> {
    for (const call of this.calls?.values() ?? []) {
      if (call.state !== "pending") continue
      if (call.name === undefined) throw broken("the upstream sent a tool call without a name")
      this.openCall(call, events)
    }
    this.close(events)
    this.finished = true
    if (this.usage === undefined) this.unreported = this.usagePromised ? { atMostTokens: this.generatedBytes } : { generated: this.generated.text() }
    this.generated.clear()
    const sawTools = this.calls !== undefined && this.calls.size > 0
    events.push({ type: "message_stop", stopReason: stopReasonOf(this.finish, sawTools, this.refused), usage: this.usage ?? makeUsage({}) })
    return events
  }

  push(data: string, out: Array<CanonicalEvent> = []): Array<CanonicalEvent> {
    if (this.finished) return out
    if (data.trim() === "[DONE]") {
      if (!this.started) throw broken("the upstream ended the stream before sending anything")
      return this.stop(out)
    }
    if (holdsMoreValues(data, MAX_EVENT_VALUES)) throw eventTooLarge()
    let chunk: unknown
    try {
      chunk = JSON.parse(data)
    } catch {
      throw broken("the upstream sent a stream chunk that is not JSON")
    }
    // A streamed chunk's `usage: null` is the promise (a whole answer's would only mean "none").
    if (!this.usagePromised && chunk !== null && typeof chunk === "object" && (chunk as { readonly usage?: unknown }).usage === null) this.promiseUsage()
    return this.pushChunk(chunk, out)
  }

  pushChunk(parsed: unknown, events: Array<CanonicalEvent> = []): Array<CanonicalEvent> {
    if (this.finished) return events
    if (parsed === null || typeof parsed !== "object") throw broken("the upstream sent a stream chunk that is not an object")
    const chunk = wire(parsed)
    if (chunk.error !== undefined && chunk.error !== null) throw upstreamStreamError(wire(chunk.error))
    if (!this.started) {
      this.started = true
      events.push({ type: "message_start", model: this.options.modelId })
    }
    if (chunk.usage !== undefined && chunk.usage !== null) this.usage = usageOf(wire(chunk.usage))
    const found: unknown = Array.isArray(chunk.choices) ? chunk.choices.find((c: unknown) => (wire(c).index ?? 0) === 0) : undefined
    if (found === undefined) return events
    const choice = wire(found)
    const delta = wire(choice.delta)
    const reasoning = delta.reasoning_content ?? delta.reasoning
    if (typeof reasoning === "string" && reasoning !== "" && this.options.visibleReasoning) this.appendText("thinking", reasoning, events)
    const content = text(delta.content)
    if (content !== undefined && content !== "") this.appendText("text", content, events)
    const refusal = text(delta.refusal)
    if (refusal !== undefined && refusal !== "") {
      this.refused = true
      this.appendText("text", refusal, events)
    }
    if (Array.isArray(delta.tool_calls)) {
      const fragments: Array<unknown> = delta.tool_calls
      for (let i = 0; i < fragments.length; i++) this.toolFragment(wire(fragments[i]), i, events)
    }
    const finishReason = text(choice.finish_reason)
    if (finishReason !== undefined && finishReason !== "") this.finish = finishReason
    return events
  }

  end(out: Array<CanonicalEvent> = []): Array<CanonicalEvent> {
    if (this.finished) return out
    if (!this.started) throw broken("the upstream ended the stream before sending anything")
    if (this.finish === undefined) throw broken("the upstream stream ended before the answer was complete")
    return this.stop(out)
  }
}

export const makeChunkParser = (options: ChunkParserOptions): ChunkParser => new ChunkParserImpl(options)

/**
 * A non-streamed `chat.completion` body as the one chunk that would carry all of it: its message
 * becomes the delta (tool calls numbered by position). Fed to `pushChunk` and ended, it yields the
 * same events a stream of the same answer would — one translation for both.
 */
export const completionAsChunk = (body: unknown): unknown => {
  if (body === null || typeof body !== "object") return body
  const completion = body as { choices?: unknown; error?: unknown }
  if (!Array.isArray(completion.choices)) return completion
  // Only the first choice is read (`pushChunk`): the others are not copied.
  const first: unknown = completion.choices.find((raw: unknown) => (wire(raw).index ?? 0) === 0)
  return {
    ...completion,
    choices: (first === undefined ? [] : [first]).map((raw: unknown) => {
      const choice = wire(raw)
      const message = wire(choice.message)
      const toolCalls = Array.isArray(message.tool_calls)
        ? message.tool_calls.slice(0, MAX_ANSWER_BLOCKS + 1).map((call: unknown, index: number) => ({ index, ...wire(call) }))
        : undefined
      return { index: choice.index ?? 0, delta: { ...message, ...(toolCalls === undefined ? {} : { tool_calls: toolCalls }) }, finish_reason: choice.finish_reason ?? null }
    })
  }
}
