/**
 * Messages SSE events from an upstream → canonical events (pure and incremental), keeping the
 * backend contract of `model/events.ts` whatever the upstream does:
 * - `message_start` names the catalog model (`placement.modelId`); the upstream's model name and
 *   message id never pass through;
 * - blocks the canonical model has no place for (server tool calls and results) are skipped and the
 *   others renumbered 0, 1, 2…; a block that starts while another is open closes the open one;
 * - usage is folded into `message_stop`: input from `message_start` (cache reads and writes are
 *   prompt tokens too, so both count in `inputTokens`), output from `message_delta`, reasoning from
 *   `output_tokens_details.thinking_tokens` or, when absent, counted from the thinking text by the
 *   backend (`unreportedThinking`);
 * - an `error` event, malformed data, or an end before `message_stop` is a `BackendError`.
 */
import type { BlockStart, CanonicalEvent, StopReason } from "../../model/events.ts"
import { makeUsage, MAX_REPORTED_TOKENS, reportedTokens } from "../../model/usage.ts"
import { BackendError, backendErrorFromStatus } from "../backend.ts"
import { type SseEvent, sseEvents } from "../upstream/sse.ts"
import { eventTooLarge, MAX_ANSWER_BLOCKS, MAX_EVENT_VALUES, MAX_TOOL_INPUT_CHARS, tooManyBlocks, toolInputTooLong } from "../upstream/upstream.ts"
import { isLarge } from "../../util/sliced-stringify.ts"
import { TextPieces } from "../../util/text-pieces.ts"
import { holdsMoreValues, isTooDeep } from "../../util/json-limits.ts"

export interface TranslateStep {
  readonly events: ReadonlyArray<CanonicalEvent>
  readonly error?: BackendError
}

export interface UpstreamTranslator {
  push(sse: SseEvent): TranslateStep
  /** An event already parsed from JSON (a non-streamed message, see `messageAsEvents`). */
  pushEvent(event: unknown): TranslateStep
  /** The upstream stream ended: fails unless `message_stop` was seen. */
  end(): TranslateStep
  /**
   * After `message_stop`: the thinking text when the upstream streamed thinking without reporting
   * its tokens. `message_stop` then carries `reasoningTokens` 0, for the backend to fill in with
   * the tokenizer (min of that count and the output tokens): this stays synchronous.
   */
  readonly unreportedThinking: string | undefined
}

interface WireUsage {
  readonly input_tokens?: number | null
  readonly output_tokens?: number | null
  readonly cache_read_input_tokens?: number | null
  readonly cache_creation_input_tokens?: number | null
  readonly output_tokens_details?: { readonly thinking_tokens?: number | null } | null
}

/** The fields read from upstream events; anything may be missing, so every read has a fallback. */
interface WireEvent {
  readonly type?: string | undefined
  readonly index?: number
  readonly message?: { readonly usage?: WireUsage }
  readonly content_block?: { readonly type?: string; readonly id?: string; readonly name?: string; readonly text?: string; readonly thinking?: string; readonly signature?: string; readonly data?: string; readonly input?: unknown }
  readonly delta?: { readonly type?: string; readonly text?: string; readonly thinking?: string; readonly signature?: string; readonly partial_json?: string; readonly stop_reason?: string | null; readonly stop_sequence?: string | null }
  readonly usage?: WireUsage
  readonly error?: { readonly type?: string; readonly message?: string }
}

/** HTTP status an upstream error type stands for (Messages API error types). */
const statusOfErrorType: Record<string, number> = {
  invalid_request_error: 400,
  request_too_large: 413,
  rate_limit_error: 429,
  api_error: 500,
  overloaded_error: 529,
  timeout_error: 504
}

const stopReasons: Record<string, StopReason> = {
  end_turn: "end_turn",
  max_tokens: "max_tokens",
  stop_sequence: "stop_sequence",
  tool_use: "tool_use",
  refusal: "refusal",
  pause_turn: "end_turn",
  model_context_window_exceeded: "max_tokens"
}

const protocolError = (message: string) => backendErrorFromStatus(502, `The upstream broke the Messages stream protocol: ${message}`)

/**
 * A field the protocol says is a non-empty string, or undefined: an upstream's JSON is only parsed,
 * never checked against the protocol's types, and one object where a string belongs must not
 * reach an encoder (it may be nested past what `JSON.stringify` can write, or lack `length`).
 */
const textOf = (value: unknown): string | undefined => (typeof value === "string" && value !== "" ? value : undefined)

/** `map[key]` for the map's own keys only (`"constructor"` is not a stop reason). */
const ownValue = <V>(map: Readonly<Record<string, V>>, key: string | undefined): V | undefined =>
  key !== undefined && Object.hasOwn(map, key) ? map[key] : undefined

const canonicalStart = (block: NonNullable<WireEvent["content_block"]>): BlockStart | undefined => {
  switch (block.type) {
    case "text":
      return { type: "text" }
    case "thinking":
      return { type: "thinking" }
    case "redacted_thinking":
      return { type: "redacted_thinking", data: textOf(block.data) ?? "" }
    case "tool_use":
      return { type: "tool_use", id: textOf(block.id) ?? "", name: textOf(block.name) ?? "" }
    default:
      return undefined
  }
}

/** Content a block start already carries (normally none: real upstreams start blocks empty). */
const initialDeltas = (index: number, block: NonNullable<WireEvent["content_block"]>): Array<CanonicalEvent> => {
  const out: Array<CanonicalEvent> = []
  const text = textOf(block.text)
  const thinking = textOf(block.thinking)
  const signature = textOf(block.signature)
  if (block.type === "text" && text !== undefined) out.push({ type: "text_delta", index, text })
  if (block.type === "thinking" && thinking !== undefined) out.push({ type: "thinking_delta", index, thinking })
  if (block.type === "thinking" && signature !== undefined) out.push({ type: "signature_delta", index, signature })
  const input = block.input
  // An input deeper than a body may be is taken as `{}`, as the events' close takes its text (parseToolInput).
  if (block.type === "tool_use" && typeof input === "object" && input !== null && Object.keys(input).length > 0 && !isTooDeep(input)) {
    out.push({ type: "tool_input_delta", index, partialJson: JSON.stringify(input) })
  }
  return out
}

/**
 * One upstream stream's translation. A class, its state in fields: an open stream holds one object,
 * not a closure per step over a shared scope.
 */
class Translator implements UpstreamTranslator {
  readonly #modelId: string
  #started = false
  #finished = false
  #startUsage: WireUsage = {}
  #finalUsage: WireUsage = {}
  #stop: { reason: StopReason; sequence?: string } = { reason: "end_turn" }
  /** The open block: upstream index → canonical index and type. */
  #open: { upstream: number; index: number; type: BlockStart["type"]; inputChars: number } | undefined = undefined
  #nextIndex = 0
  /** Blocks the upstream started, server tool blocks (skipped) included: at most MAX_ANSWER_BLOCKS. */
  #blocks = 0
  /** Thinking text, kept for `unreportedThinking` (as a few flat runs: `TextPieces`). */
  readonly #thinking = new TextPieces()

  constructor(modelId: string) {
    this.#modelId = modelId
  }

  private closeOpen(): Array<CanonicalEvent> {
    const open = this.#open
    if (open === undefined) return []
    this.#open = undefined
    return [{ type: "block_stop", index: open.index }]
  }

  private usage() {
    const finalUsage = this.#finalUsage
    const startUsage = this.#startUsage
    const pick = (key: keyof WireUsage) => reportedTokens(finalUsage[key] ?? startUsage[key])
    const cacheRead = pick("cache_read_input_tokens")
    const outputTokens = pick("output_tokens")
    return makeUsage({
      inputTokens: Math.min(pick("input_tokens") + cacheRead + pick("cache_creation_input_tokens"), MAX_REPORTED_TOKENS),
      cachedInputTokens: cacheRead,
      outputTokens,
      reasoningTokens: reportedTokens(finalUsage.output_tokens_details?.thinking_tokens)
    })
  }

  private delta(event: WireEvent): Array<CanonicalEvent> | BackendError {
    const d = event.delta
    const open = this.#open
    if (open === undefined || event.index !== open.upstream || typeof d !== "object" || d === null) return []
    const { index, type } = open
    if (d.type === "text_delta" && type === "text") {
      const text = textOf(d.text)
      return text === undefined ? [] : [{ type: "text_delta", index, text }]
    }
    if (d.type === "thinking_delta" && type === "thinking") {
      const thinking = textOf(d.thinking)
      if (thinking === undefined) return []
      this.#thinking.add(thinking)
      return [{ type: "thinking_delta", index, thinking }]
    }
    if (d.type === "signature_delta" && type === "thinking") {
      const signature = textOf(d.signature)
      return signature === undefined ? [] : [{ type: "signature_delta", index, signature }]
    }
    if (d.type === "input_json_delta" && type === "tool_use") {
      const partialJson = textOf(d.partial_json)
      if (partialJson === undefined) return []
      open.inputChars += partialJson.length
      if (open.inputChars > MAX_TOOL_INPUT_CHARS) return toolInputTooLong()
      return [{ type: "tool_input_delta", index, partialJson }]
    }
    return [] // citations and other deltas have no canonical form
  }

  private translate(event: WireEvent): Array<CanonicalEvent> | BackendError {
    // After message_stop the answer is whole: nothing that follows can spoil it.
    if (this.#finished || event.type === "ping") return []
    if (event.type === "error") {
      const type = textOf(event.error?.type)
      const status = ownValue(statusOfErrorType, type) ?? 500
      return backendErrorFromStatus(status, textOf(event.error?.message) ?? "The upstream stream failed")
    }
    if (event.type === "message_start") {
      if (this.#started) return protocolError("a second message_start")
      this.#started = true
      this.#startUsage = event.message?.usage ?? {}
      return [{ type: "message_start", model: this.#modelId, usage: this.usage() }]
    }
    if (!this.#started) return protocolError(`${event.type} before message_start`)
    switch (event.type) {
      case "content_block_start": {
        if (++this.#blocks > MAX_ANSWER_BLOCKS) return tooManyBlocks()
        const closed = this.closeOpen()
        const block = event.content_block ?? {}
        const start = canonicalStart(block)
        if (start === undefined) return closed // a server tool block: skipped, not numbered
        // An input the block carries (a whole answer's): measured before it is serialized.
        if (start.type === "tool_use" && isLarge(block.input, MAX_TOOL_INPUT_CHARS)) return toolInputTooLong()
        const index = this.#nextIndex++
        this.#open = { upstream: event.index ?? -1, index, type: start.type, inputChars: 0 }
        return [...closed, { type: "block_start", index, block: start }, ...initialDeltas(index, block)]
      }
      case "content_block_delta":
        return this.delta(event)
      case "content_block_stop":
        return this.#open !== undefined && event.index === this.#open.upstream ? this.closeOpen() : []
      case "message_delta": {
        const reason = textOf(event.delta?.stop_reason)
        const sequence = textOf(event.delta?.stop_sequence)
        if (reason !== undefined) this.#stop = { reason: ownValue(stopReasons, reason) ?? "end_turn", ...(sequence === undefined ? {} : { sequence }) }
        this.#finalUsage = { ...this.#finalUsage, ...event.usage }
        return []
      }
      case "message_stop": {
        this.#finished = true
        const stop = this.#stop
        return [...this.closeOpen(), {
          type: "message_stop",
          stopReason: stop.reason,
          ...(stop.sequence === undefined ? {} : { stopSequence: stop.sequence }),
          usage: this.usage()
        }]
      }
      default:
        return []
    }
  }

  private step(event: WireEvent): TranslateStep {
    const result = this.translate(event)
    return result instanceof BackendError ? { events: [], error: result } : { events: result }
  }

  pushEvent(event: unknown): TranslateStep {
    return event === null || typeof event !== "object" ? { events: [], error: protocolError("an event that is not an object") } : this.step(event as WireEvent)
  }

  push(sse: SseEvent): TranslateStep {
    if (holdsMoreValues(sse.data, MAX_EVENT_VALUES)) return { events: [], error: eventTooLarge() }
    let parsed: WireEvent
    try {
      parsed = JSON.parse(sse.data) as WireEvent
    } catch {
      if (sse.event === "ping") return { events: [] }
      return { events: [], error: protocolError(`event data is not JSON: ${sse.data.slice(0, 100)}`) }
    }
    // The data's own `type` is authoritative; the SSE name covers frames that omit it (copied
    // only then: this runs once per streamed token).
    return this.step(parsed?.type !== undefined ? parsed : { ...parsed, type: sse.event })
  }

  end(): TranslateStep {
    return this.#finished ? { events: [] } : { events: [], error: protocolError("the stream ended before message_stop") }
  }

  get unreportedThinking(): string | undefined {
    if (!this.#finished || typeof this.#finalUsage.output_tokens_details?.thinking_tokens === "number") return undefined
    const text = this.#thinking.text()
    return text === "" ? undefined : text
  }
}

export const makeUpstreamTranslator = (modelId: string): UpstreamTranslator => new Translator(modelId)

/** Translates a whole Messages SSE text at once (tests). */
export const translateMessagesSse = (text: string, modelId: string): TranslateStep & { readonly unreportedThinking?: string | undefined } => {
  const parser = sseEvents()
  const translator = makeUpstreamTranslator(modelId)
  const events: Array<CanonicalEvent> = []
  for (const sse of [...parser.feed(text), ...parser.end()]) {
    const step = translator.push(sse)
    events.push(...step.events)
    if (step.error !== undefined) return { events, error: step.error }
  }
  const last = translator.end()
  return last.error === undefined ? { events, unreportedThinking: translator.unreportedThinking } : { events, error: last.error }
}

/**
 * A non-streamed Messages response as the events a stream of it would carry: each content block
 * starts holding its whole content (the translator's `initialDeltas` turn that into deltas), so
 * one translation serves both. An error body becomes an `error` event.
 */
export const messageAsEvents = (body: unknown): ReadonlyArray<unknown> => {
  const message = body as { type?: unknown; content?: unknown; usage?: unknown; stop_reason?: unknown; stop_sequence?: unknown; error?: unknown }
  if (message === null || typeof message !== "object") return [body]
  if (message.type === "error") return [message]
  // One block past the limit is enough for the translator to refuse the answer: the rest are not copied.
  const content = Array.isArray(message.content) ? message.content.slice(0, MAX_ANSWER_BLOCKS + 1) : []
  return [
    { type: "message_start", message: { usage: message.usage ?? {} } },
    ...content.flatMap((block, index) => [
      { type: "content_block_start", index, content_block: block },
      { type: "content_block_stop", index }
    ]),
    { type: "message_delta", delta: { stop_reason: message.stop_reason ?? null, stop_sequence: message.stop_sequence ?? null }, usage: message.usage ?? {} },
    { type: "message_stop" }
  ]
}
