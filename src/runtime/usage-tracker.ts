/**
 * What a call used, as its events pass by. A stream that finishes reports exact usage in
 * `message_stop`; one that breaks (or whose client leaves) never does, so until then the tracker
 * estimates: the input from `message_start` (or the request's estimate) and the output from the
 * tokens of every delta sent. That estimate is what a broken call is charged: the client received
 * that output, and the reservation already bounds it.
 */
import type { CanonicalEvent } from "../model/events.ts"
import { countTextTokens } from "../model/tokens.ts"
import { makeUsage, type Usage } from "../model/usage.ts"

export interface UsageTracker {
  add(event: CanonicalEvent): void
  /** True once any content (a block) was produced. */
  readonly produced: boolean
  /** Exact usage after `message_stop`, else the estimate so far. */
  usage(): Usage
}

export const makeUsageTracker = (inputEstimate: number): UsageTracker => {
  let input = inputEstimate
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
    usage: () => exact ?? makeUsage({ inputTokens: input, outputTokens: pieces.reduce((sum, piece) => sum + countTextTokens(piece), 0) })
  }
}
