/**
 * Canonical answer → `text_completion` body or SSE chunks. Same framing as Chat Completions:
 * `data:` frames only, a last chunk with `finish_reason`, the usage chunk (`choices: []`) when
 * `include_usage` was asked, then `data: [DONE]`; a failure ends with the error chunk, no [DONE].
 */
import type { CanonicalEvent, CanonicalResponse } from "../../model/events.ts"
import { totalTokens, type Usage } from "../../model/usage.ts"
import { commentSignals, dataFrame } from "../../http/sse.ts"
import { finishReason } from "../chat/encode-body.ts"
import { CHAT_DONE_FRAME, errorFrame } from "../chat/encode-stream.ts"
import type { EncodeContext, StreamEncoder, StreamFailure } from "../dialect.ts"
import { piecesOf, rememberPieces } from "../../util/long-strings.ts"
import { ropeOf, splicedPieces, standIn } from "../spliced-json.ts"
import type { CompletionsEcho } from "./decode.ts"

const PROMPT_STAND_IN = standIn("prompt")

/** Legacy completions report the three totals only. */
const completionsUsage = (usage: Usage) => ({
  prompt_tokens: usage.inputTokens,
  completion_tokens: usage.outputTokens,
  total_tokens: totalTokens(usage)
})

const envelope = (context: EncodeContext<CompletionsEcho>) => ({
  id: context.id,
  object: "text_completion",
  created: context.createdAt,
  model: context.model
})

/**
 * The echoed prompt and the answer as one text. A prompt kept in pieces (a long one, as parsed:
 * `util/long-strings.ts`) leaves the text in pieces too, so the body's sliced serializer reads it
 * piece by piece instead of flattening megabytes at once.
 */
const echoedText = (prompt: string, answer: string): string => {
  const text = prompt + answer
  const pieces = piecesOf(prompt)
  if (pieces !== undefined) rememberPieces(text, answer === "" ? pieces : [...pieces, answer])
  return text
}

export const encodeCompletionsBody = (response: CanonicalResponse, context: EncodeContext<CompletionsEcho>) => ({
  ...envelope(context),
  choices: [{
    text: echoedText(context.echo.echoPrompt ?? "", response.content.map((block) => (block.type === "text" ? block.text : "")).join("")),
    index: 0,
    logprobs: null,
    finish_reason: finishReason(response.stopReason)
  }],
  usage: completionsUsage(response.usage),
  system_fingerprint: null
})

export const makeCompletionsStreamEncoder = (context: EncodeContext<CompletionsEcho>): StreamEncoder => new CompletionsStreamEncoder(context)

/**
 * One stream's encoder: its state as fields, its steps as methods (an open stream holds this one
 * object, not a closure per step over a shared scope).
 */
class CompletionsStreamEncoder implements StreamEncoder {
  readonly #context: EncodeContext<CompletionsEcho>
  /** The texts the last answer was joined from, when it was the echoed prompt made ahead in pieces. */
  #pieces: ReadonlyArray<string> | undefined = undefined

  constructor(context: EncodeContext<CompletionsEcho>) {
    this.#context = context
  }

  private chunk(text: string, finish: string | null = null): string {
    return dataFrame({
      ...envelope(this.#context),
      choices: [{ text, index: 0, logprobs: null, finish_reason: finish }],
      ...(this.#context.echo.includeUsage ? { usage: null } : {})
    })
  }

  /** The first chunk, the echoed prompt: its JSON made ahead in pieces when large (`echoPromptJson`). */
  private echoChunk(prompt: string): string {
    const json = this.#context.echo.echoPromptJson
    if (json === undefined) return this.chunk(prompt)
    const made = splicedPieces(this.chunk(PROMPT_STAND_IN), [{ key: "text", standIn: PROMPT_STAND_IN, pieces: json }])
    if (typeof made === "string") return made
    this.#pieces = made
    return ropeOf(made)
  }

  event(event: CanonicalEvent): string {
    this.#pieces = undefined
    const echo = this.#context.echo
    switch (event.type) {
      case "message_start":
        return echo.echoPrompt === undefined || echo.echoPrompt === "" ? "" : this.echoChunk(echo.echoPrompt)
      case "text_delta":
        return event.text === "" ? "" : this.chunk(event.text)
      case "message_stop": {
        const last = this.chunk("", finishReason(event.stopReason))
        const usage = echo.includeUsage ? dataFrame({ ...envelope(this.#context), choices: [], usage: completionsUsage(event.usage) }) : ""
        return last + usage + CHAT_DONE_FRAME
      }
      default:
        // Thinking and tool blocks have no place in a text completion.
        return ""
    }
  }

  error(failure: StreamFailure): string {
    this.#pieces = undefined
    return errorFrame(failure)
  }

  pieces(): ReadonlyArray<string> | undefined {
    const pieces = this.#pieces
    this.#pieces = undefined
    return pieces
  }

  keepalive(): string {
    return commentSignals.keepalive()
  }

  switchover(note: string): string {
    return commentSignals.switchover(note)
  }
}
