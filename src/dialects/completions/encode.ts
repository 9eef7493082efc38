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
import type { EncodeContext, StreamEncoder } from "../dialect.ts"
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

export const makeCompletionsStreamEncoder = (context: EncodeContext<CompletionsEcho>): StreamEncoder => {
  const includeUsage = context.echo.includeUsage
  const chunk = (text: string, finish: string | null = null) =>
    dataFrame({
      ...envelope(context),
      choices: [{ text, index: 0, logprobs: null, finish_reason: finish }],
      ...(includeUsage ? { usage: null } : {})
    })

  // The texts the last answer was joined from, when it was the echoed prompt made ahead in pieces.
  let framePieces: ReadonlyArray<string> | undefined
  /** The first chunk, the echoed prompt: its JSON made ahead in pieces when large (`echoPromptJson`). */
  const echoChunk = (prompt: string): string => {
    const json = context.echo.echoPromptJson
    if (json === undefined) return chunk(prompt)
    const made = splicedPieces(chunk(PROMPT_STAND_IN), [{ key: "text", standIn: PROMPT_STAND_IN, pieces: json }])
    if (typeof made === "string") return made
    framePieces = made
    return ropeOf(made)
  }

  const event = (event: CanonicalEvent): string => {
    framePieces = undefined
    switch (event.type) {
      case "message_start":
        return context.echo.echoPrompt === undefined || context.echo.echoPrompt === "" ? "" : echoChunk(context.echo.echoPrompt)
      case "text_delta":
        return event.text === "" ? "" : chunk(event.text)
      case "message_stop": {
        const last = chunk("", finishReason(event.stopReason))
        const usage = includeUsage ? dataFrame({ ...envelope(context), choices: [], usage: completionsUsage(event.usage) }) : ""
        return last + usage + CHAT_DONE_FRAME
      }
      default:
        // Thinking and tool blocks have no place in a text completion.
        return ""
    }
  }

  return {
    event,
    error: (failure) => {
      framePieces = undefined
      return errorFrame(failure)
    },
    pieces: () => {
      const pieces = framePieces
      framePieces = undefined
      return pieces
    },
    ...commentSignals
  }
}
