/**
 * What a streamed call has delivered to its client, kept once for the two rules that read it:
 * - where a broken stream may carry on (continuation.ts): the text so far, the block the client
 *   has open, the index its next block gets, whether a tool call started;
 * - what the call used (metering). A stream that finishes reports exact usage in `message_stop`;
 *   one that breaks (or whose client leaves) never does, so the output is estimated from the
 *   exact tokens of what was delivered (text, thinking and tool-call arguments) and the input
 *   from `message_start`, else the request's exact count — both counted in the tokenizer thread
 *   only then. That estimate is what a broken call is charged: the client received that output,
 *   and the reservation (an upper bound of the same) already covers it.
 *
 * The dispatcher feeds it every chunk it delivers, once. An open stream holds it for as long as it
 * lasts, so the answer is kept once, assembled by block (`ResponseBuilder`, its texts as
 * `TextPieces`), and read by every rule that needs it: the continuation and the usage estimate
 * here, and through `answer` the Responses encoder (a block's text when it ends) and a stored
 * response's record — each kept its own copy of the text until they read this one.
 *
 * It also notices an upstream that ignores the output ceiling it was sent (`max_tokens`) and would
 * stream without end — the text kept here would grow until the client left (`overran`).
 */
import { Effect } from "effect"
import { type AnswerSoFar, type CanonicalEvent, makeResponseBuilder } from "../model/events.ts"
import type { CanonicalRequest } from "../model/request.ts"
import { countTexts } from "../model/tokenizer.ts"
import { TokenFloor } from "../model/token-floor.ts"
import { countRequestTokens } from "../model/tokens.ts"
import { makeUsage, type Usage } from "../model/usage.ts"
import type { SentState } from "./continuation.ts"

/**
 * How far past its output ceiling a stream may go before the dispatcher stops it: twice the
 * ceiling plus 1,000 tokens, counted by `TokenFloor` (never more than o200k_base's count, and
 * 0.4–0.6 of it on real text). The margin is for a model whose own tokenizer counts fewer tokens
 * than o200k for the same text; a stream stopped here has overrun its ceiling whatever the model.
 */
const RUNAWAY_FACTOR = 2
const RUNAWAY_SLACK_TOKENS = 1_000
/** The output tokens (by the floor) past which a stream sent `ceiling` is stopped. */
export const runawayLine = (ceiling: number) => RUNAWAY_FACTOR * ceiling + RUNAWAY_SLACK_TOKENS

export class Delivered {
  /** What was sent upstream: counted only when no `message_start` reported its input. */
  readonly #request: CanonicalRequest | undefined
  /** The answer as delivered: every event, by block. */
  readonly #answer = makeResponseBuilder()
  #open: SentState["open"] = undefined
  #nextIndex = 0
  #sawToolUse = false
  #input: number | undefined = undefined
  #exact: Usage | undefined = undefined
  /** A lower bound of the output tokens delivered, kept when the request has an output ceiling. */
  readonly #floor: TokenFloor | undefined
  /**
   * Tool calls delivered: each is at least one output token more (its name) than its arguments,
   * which the floor counts — so an upstream streaming calls without end is stopped too.
   */
  #toolCalls = 0
  readonly #stopPast: number

  /** `request`: left out where only the continuation reads this (no usage is asked). */
  constructor(request?: CanonicalRequest) {
    this.#request = request
    const ceiling = request?.maxOutputTokens
    this.#floor = ceiling === undefined ? undefined : new TokenFloor()
    this.#stopPast = ceiling === undefined ? Infinity : runawayLine(ceiling)
  }

  add(events: ReadonlyArray<CanonicalEvent>): void {
    for (const event of events) {
      this.#answer.add(event)
      switch (event.type) {
        case "message_start":
          if (event.usage !== undefined && event.usage.inputTokens > 0) this.#input = event.usage.inputTokens
          break
        case "block_start":
          this.#open = { index: event.index, type: event.block.type }
          this.#nextIndex = Math.max(this.#nextIndex, event.index + 1)
          if (event.block.type === "tool_use") {
            this.#sawToolUse = true
            this.#toolCalls++
          }
          break
        case "block_stop":
          this.#open = undefined
          break
        case "text_delta":
          this.#floor?.add(event.text)
          break
        case "thinking_delta":
          this.#floor?.add(event.thinking)
          break
        case "tool_input_delta":
          this.#floor?.add(event.partialJson)
          break
        case "message_stop":
          this.#exact = event.usage
          break
        default:
          break
      }
    }
  }

  /** The answer as the client has been sent it, so far (read, never fed, by others). */
  get answer(): AnswerSoFar {
    return this.#answer
  }

  /** For the continuation: what the client has been sent. */
  get state(): SentState {
    return { text: this.#answer.text(), open: this.#open, nextIndex: this.#nextIndex, sawToolUse: this.#sawToolUse }
  }

  /**
   * The output ceiling the upstream was sent, once what it delivered is past its `runawayLine`;
   * else undefined.
   */
  get overran(): number | undefined {
    return this.#floor !== undefined && this.#floor.tokens + this.#toolCalls > this.#stopPast ? this.#request!.maxOutputTokens : undefined
  }

  /** True once any content (a block) was delivered. */
  get produced(): boolean {
    return this.#nextIndex > 0
  }

  /** Exact usage after `message_stop`, else the estimate from what was delivered. */
  usage(): Effect.Effect<Usage> {
    if (this.#exact !== undefined) return Effect.succeed(this.#exact)
    const request = this.#request
    const parts = this.#answer.outputParts()
    return Effect.all([this.#input !== undefined || request === undefined ? Effect.succeed(this.#input ?? 0) : countRequestTokens(request), countTexts(parts)]).pipe(
      Effect.map(([inputTokens, counts]) => makeUsage({ inputTokens, outputTokens: counts.reduce((sum, n) => sum + n, 0) }))
    )
  }
}
