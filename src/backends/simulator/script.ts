/**
 * Turns a decided reply into the exact event sequence the simulator will emit, enforcing the
 * output ceiling, stop sequences and reasoning. Deterministic: timing and faults are applied later.
 *
 * Output accounting (what `usage` reports):
 * - reasoning comes first and counts against `maxOutputTokens`, visible or hidden; when it uses
 *   the whole ceiling the answer is empty and the stop reason is `max_tokens` (spec Responses
 *   rule 3);
 * - the answer (text, or tool-call arguments JSON) is cut at the remaining ceiling, in which case
 *   the stop reason is `max_tokens` and `outputTokens` equals the ceiling exactly;
 * - a stop sequence (text only, not thinking or tool JSON) cuts the text just before its first
 *   occurrence; the stop reason is `stop_sequence` and `stopSequence` names it;
 * - token counts come from the o200k_base tokenizer over exactly what is emitted (in the tokenizer
 *   thread, which only tokenizes as far as the ceiling reaches: an echoed 1 MiB text costs the
 *   event loop nothing);
 * - hidden reasoning is paced like visible output: its tokens delay the event that follows it.
 */
import { Effect, Fiber } from "effect"
import type { BlockStart, CanonicalEvent, StopReason } from "../../model/events.ts"
import type { CanonicalRequest, ReasoningEffort } from "../../model/request.ts"
import type { TokenPiece } from "../../model/tokenizer.ts"
import { takeTokenPieces } from "../../model/tokenizer.ts"
import { makeUsage } from "../../model/usage.ts"
import { hashString, makePrng } from "./prng.ts"
import type { Reply } from "./reply.ts"
import { decideReply } from "./reply.ts"
import { composeProse } from "./words.ts"

/** One event to emit and the output tokens generated before it (what pacing waits for). */
export interface ScriptStep {
  readonly event: CanonicalEvent
  readonly tokens: number
}

export interface ScriptInput {
  readonly request: CanonicalRequest
  /** The placement serves a reasoning model. */
  readonly reasoningModel: boolean
  readonly model: string
  readonly seed: number
  /**
   * The prompt's tokens and how many were cached; counted while the reply is written (both are
   * round trips to the tokenizer thread) and filled into `message_start` and `message_stop`.
   */
  readonly prompt: Effect.Effect<{ readonly inputTokens: number; readonly cachedInputTokens: number }>
}

/** Output tokens per delta event. */
const TOKENS_PER_DELTA = 3

const effortScale: Record<ReasoningEffort, number> = { minimal: 0.25, low: 0.5, medium: 1, high: 2 }

/** Pieces grouped into deltas of about TOKENS_PER_DELTA tokens. */
const groupDeltas = (pieces: ReadonlyArray<TokenPiece>): Array<TokenPiece> => {
  const deltas: Array<TokenPiece> = []
  let text = ""
  let tokens = 0
  for (const piece of pieces) {
    text += piece.text
    tokens += piece.tokens
    if (tokens >= TOKENS_PER_DELTA) {
      deltas.push({ text, tokens })
      text = ""
      tokens = 0
    }
  }
  if (text !== "" || tokens > 0) deltas.push({ text, tokens })
  return deltas
}

/** The earliest stop sequence in `text` (the longest one on a tie). */
const firstStopSequence = (text: string, sequences: ReadonlyArray<string>) => {
  let best: { at: number; sequence: string } | undefined
  for (const sequence of sequences) {
    const at = sequence === "" ? -1 : text.indexOf(sequence)
    if (at !== -1 && (best === undefined || at < best.at || (at === best.at && sequence.length > best.sequence.length))) {
      best = { at, sequence }
    }
  }
  return best
}

/** How long the model thinks: 60–200 tokens at medium effort, scaled by effort, capped by budget. */
const plannedReasoningTokens = (request: CanonicalRequest, seed: number): number => {
  const prng = makePrng(seed ^ 0x5eed)
  const wanted = Math.max(16, Math.round(prng.int(60, 200) * effortScale[request.reasoning.effort ?? "medium"]))
  return Math.min(wanted, request.reasoning.budgetTokens ?? wanted)
}

/** The blocks the simulator streams (it never produces redacted thinking). */
type StreamedBlock = Exclude<BlockStart, { readonly type: "redacted_thinking" }>

/** The delta event that carries `text` in a block of the given kind. */
const deltaEvent = (kind: StreamedBlock["type"], index: number, text: string): CanonicalEvent =>
  kind === "text"
    ? { type: "text_delta", index, text }
    : kind === "thinking"
    ? { type: "thinking_delta", index, thinking: text }
    : { type: "tool_input_delta", index, partialJson: text }

const sumTokens = (pieces: ReadonlyArray<TokenPiece>): number => pieces.reduce((sum, p) => sum + p.tokens, 0)

export const writeScript = Effect.fnUntraced(function*(input: ScriptInput): Effect.fn.Return<Array<ScriptStep>> {
  const { request, model, seed } = input
  const prompt = yield* Effect.forkChild(input.prompt)
  const budget = request.maxOutputTokens ?? Number.POSITIVE_INFINITY
  const steps: Array<ScriptStep> = []
  // Hidden reasoning shows nothing but takes time: its tokens are paced on the next event.
  let hiddenTokens = 0
  const emit = (event: CanonicalEvent, tokens = 0) => {
    steps.push({ event, tokens: tokens + hiddenTokens })
    hiddenTokens = 0
  }
  let index = 0
  /** Emits one whole block: start, its pieces as deltas, any closing events, stop. */
  const block = (start: StreamedBlock, pieces: ReadonlyArray<TokenPiece>, closing: ReadonlyArray<CanonicalEvent> = []) => {
    emit({ type: "block_start", index, block: start })
    for (const delta of groupDeltas(pieces)) emit(deltaEvent(start.type, index, delta.text), delta.tokens)
    for (const event of closing) emit(event)
    emit({ type: "block_stop", index })
    index++
  }
  let used = 0
  let reasoningTokens = 0
  let stop: { reason: StopReason; sequence?: string } | undefined

  emit({
    type: "message_start",
    model,
    usage: makeUsage({}) // filled in below, once the prompt is counted
  })

  if (input.reasoningModel && request.reasoning.enabled) {
    const planned = plannedReasoningTokens(request, seed)
    reasoningTokens = Math.min(planned, budget)
    used = reasoningTokens
    if (request.reasoning.visible && reasoningTokens > 0) {
      const prose = yield* composeProse(makePrng(seed ^ 0x7417), planned)
      const thinking = (yield* takeTokenPieces(`I read the request and plan the answer. ${prose}`, reasoningTokens)).pieces
      const digest = hashString(thinking.map((p) => p.text).join(""), seed).toString(16)
      const signature = btoa(`simulator-signature:${model}:${digest}`)
      block({ type: "thinking" }, thinking, [{ type: "signature_delta", index, signature }])
    } else {
      hiddenTokens = reasoningTokens
    }
    if (used >= budget) stop = { reason: "max_tokens" }
  }

  if (stop === undefined) {
    const reply: Reply = yield* decideReply(request, makePrng(seed))
    if (reply.kind === "text") {
      const match = firstStopSequence(reply.text, request.stopSequences)
      const text = match === undefined ? reply.text : reply.text.slice(0, match.at)
      const { pieces, cut } = yield* takeTokenPieces(text, budget - used)
      if (pieces.length > 0) block({ type: "text" }, pieces)
      used = cut ? budget : used + sumTokens(pieces)
      stop = cut
        ? { reason: "max_tokens" }
        : match !== undefined
        ? { reason: "stop_sequence", sequence: match.sequence }
        : { reason: "end_turn" }
    } else {
      for (const call of reply.calls) {
        const { pieces, cut } = yield* takeTokenPieces(JSON.stringify(call.input), budget - used)
        if (pieces.length > 0) block({ type: "tool_use", id: call.id, name: call.name }, pieces)
        used = cut ? budget : used + sumTokens(pieces)
        if (cut) {
          // The ceiling fell inside (or right before) this call: its arguments are truncated JSON.
          stop = { reason: "max_tokens" }
          break
        }
      }
      stop ??= { reason: "tool_use" }
    }
  }

  const { inputTokens, cachedInputTokens } = yield* Fiber.join(prompt)
  steps[0] = { ...steps[0], event: { type: "message_start", model, usage: makeUsage({ inputTokens, cachedInputTokens }) } }
  emit({
    type: "message_stop",
    stopReason: stop.reason,
    ...(stop.sequence === undefined ? {} : { stopSequence: stop.sequence }),
    usage: makeUsage({
      inputTokens,
      cachedInputTokens,
      outputTokens: used,
      reasoningTokens
    })
  })
  return steps
})
