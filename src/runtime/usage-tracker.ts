/**
 * What a call used, as its events pass by. A stream that finishes reports exact usage in
 * `message_stop`; one that breaks (or whose client leaves) never does, so the tracker estimates:
 * the input from `message_start` (else the request's exact count) and the output from the exact
 * tokens of the text sent (counted in parts of 64 deltas joined: `TextPieces`), both counted in
 * the tokenizer thread only then. That estimate is
 * what a broken call is charged: the client received that output, and the reservation (an upper
 * bound of the same) already covers it.
 */
import { Effect } from "effect"
import type { CanonicalEvent } from "../model/events.ts"
import type { CanonicalRequest } from "../model/request.ts"
import { countTexts } from "../model/tokenizer.ts"
import { countRequestTokens } from "../model/tokens.ts"
import { makeUsage, type Usage } from "../model/usage.ts"
import { TextPieces } from "../util/text-pieces.ts"

export interface UsageTracker {
  add(event: CanonicalEvent): void
  /** True once any content (a block) was produced. */
  readonly produced: boolean
  /** Exact usage after `message_stop`, else the estimate so far. */
  usage(): Effect.Effect<Usage>
}

/**
 * `request`: what was sent upstream, counted only when no `message_start` reported its input. A
 * class, not an object of closures: an open stream holds one small object (an object literal with
 * a getter was kept as a hash table, with a closure per method, ~0.7 KiB per stream).
 */
export const makeUsageTracker = (request: CanonicalRequest): UsageTracker => new StreamUsage(request)

class StreamUsage implements UsageTracker {
  readonly #request: CanonicalRequest
  #input: number | undefined = undefined
  // The output is only tokenized if the stream ends without exact usage: keep its text until then.
  readonly #pieces = new TextPieces()
  #exact: Usage | undefined = undefined
  #produced = false

  constructor(request: CanonicalRequest) {
    this.#request = request
  }

  add(event: CanonicalEvent): void {
    switch (event.type) {
      case "message_start":
        if (event.usage !== undefined && event.usage.inputTokens > 0) this.#input = event.usage.inputTokens
        return
      case "block_start":
        this.#produced = true
        return
      case "text_delta":
        if (this.#exact === undefined) this.#pieces.add(event.text)
        return
      case "thinking_delta":
        if (this.#exact === undefined) this.#pieces.add(event.thinking)
        return
      case "tool_input_delta":
        if (this.#exact === undefined) this.#pieces.add(event.partialJson)
        return
      case "message_stop":
        this.#exact = event.usage
        this.#pieces.clear()
        return
      default:
        return
    }
  }

  get produced(): boolean {
    return this.#produced
  }

  usage(): Effect.Effect<Usage> {
    if (this.#exact !== undefined) return Effect.succeed(this.#exact)
    return Effect.all([this.#input === undefined ? countRequestTokens(this.#request) : Effect.succeed(this.#input), countTexts(this.#pieces.parts())]).pipe(
      Effect.map(([inputTokens, counts]) => makeUsage({ inputTokens, outputTokens: counts.reduce((sum, n) => sum + n, 0) }))
    )
  }
}
