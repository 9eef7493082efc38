/**
 * What a call used, as its events pass by. A stream that finishes reports exact usage in
 * `message_stop`; one that breaks (or whose client leaves) never does, so the tracker estimates:
 * the input from `message_start` (else the request's exact count) and the output from the exact
 * tokens of every delta sent, both counted in the tokenizer thread only then. That estimate is
 * what a broken call is charged: the client received that output, and the reservation (an upper
 * bound of the same) already covers it.
 */
import { Effect } from "effect"
import type { CanonicalEvent } from "../model/events.ts"
import type { CanonicalRequest } from "../model/request.ts"
import { countTexts } from "../model/tokenizer.ts"
import { countRequestTokens } from "../model/tokens.ts"
import { makeUsage, type Usage } from "../model/usage.ts"

export interface UsageTracker {
  add(event: CanonicalEvent): void
  /** True once any content (a block) was produced. */
  readonly produced: boolean
  /** Exact usage after `message_stop`, else the estimate so far. */
  usage(): Effect.Effect<Usage>
}

/** `request`: what was sent upstream, counted only when no `message_start` reported its input. */
export const makeUsageTracker = (request: CanonicalRequest): UsageTracker => {
  let input: number | undefined
  // The output is only tokenized if the stream ends without exact usage: keep the pieces until then.
  const pieces: Array<string> = []
  let exact: Usage | undefined
  let produced = false
  return {
    add(event) {
      switch (event.type) {
        case "message_start":
          if (event.usage !== undefined && event.usage.inputTokens > 0) input = event.usage.inputTokens
          return
        case "block_start":
          produced = true
          return
        case "text_delta":
          if (exact === undefined) pieces.push(event.text)
          return
        case "thinking_delta":
          if (exact === undefined) pieces.push(event.thinking)
          return
        case "tool_input_delta":
          if (exact === undefined) pieces.push(event.partialJson)
          return
        case "message_stop":
          exact = event.usage
          pieces.length = 0
          return
        default:
          return
      }
    },
    get produced() {
      return produced
    },
    usage: () =>
      exact !== undefined
        ? Effect.succeed(exact)
        : Effect.all([input === undefined ? countRequestTokens(request) : Effect.succeed(input), countTexts(pieces)]).pipe(
          Effect.map(([inputTokens, counts]) => makeUsage({ inputTokens, outputTokens: counts.reduce((sum, n) => sum + n, 0) }))
        )
  }
}
