/**
 * Continuity after the first byte: what the client has been sent, whether a broken stream may go
 * on elsewhere, and how a continuation's events are spliced into what was sent.
 *
 * A break may continue only in plain text: no tool call was started (its arguments cannot be
 * resumed faithfully) and no non-text block is open. The continuation is a fresh call (the
 * caller's `resume(textSoFar)` puts the text so far as an assistant prefix), so its events are
 * renumbered: its `message_start` is dropped, its first text block continues the client's open
 * text block, and later blocks follow the client's numbering. `message_stop` (and its usage) is
 * the continuation's: usage of the broken attempt is not known (it never sent `message_stop`).
 */
import type { BlockStart, CanonicalEvent } from "../model/events.ts"
import { TextPieces } from "../util/text-pieces.ts"

export interface SentState {
  /** Every text delta sent so far, concatenated. */
  readonly text: string
  /** The block the client has open, if any. */
  readonly open: { readonly index: number; readonly type: BlockStart["type"] } | undefined
  /** The index the next new block gets on the client's side. */
  readonly nextIndex: number
  readonly sawToolUse: boolean
}

export interface SentTracker {
  add(events: ReadonlyArray<CanonicalEvent>): void
  readonly state: SentState
}

/**
 * Per event only what changed is updated, and the text is kept as its deltas, joined when a break
 * asks for it: appending to a string per delta left a rope of 32-byte nodes (and a new state
 * object) per token, held for as long as the stream is open. A class, not an object of closures:
 * one small object per open stream (see `makeUsageTracker`).
 */
export const makeSentTracker = (): SentTracker => new SentSoFar()

class SentSoFar implements SentTracker {
  readonly #text = new TextPieces()
  #open: SentState["open"] = undefined
  #nextIndex = 0
  #sawToolUse = false

  add(events: ReadonlyArray<CanonicalEvent>): void {
    for (const event of events) {
      switch (event.type) {
        case "block_start":
          this.#open = { index: event.index, type: event.block.type }
          this.#nextIndex = Math.max(this.#nextIndex, event.index + 1)
          this.#sawToolUse ||= event.block.type === "tool_use"
          break
        case "block_stop":
          this.#open = undefined
          break
        case "text_delta":
          this.#text.add(event.text)
          break
        default:
          break
      }
    }
  }

  get state(): SentState {
    return { text: this.#text.text(), open: this.#open, nextIndex: this.#nextIndex, sawToolUse: this.#sawToolUse }
  }
}

/** Plain text so far, and nothing but text open: another model may carry on from here. */
export const canContinueText = (sent: SentState): boolean =>
  !sent.sawToolUse && (sent.open === undefined || sent.open.type === "text")

/** Maps a continuation's events onto the client's stream (see the file header). */
export const makeSplicer = (sent: SentState) => {
  const openText = sent.open?.type === "text" ? sent.open.index : undefined
  let mergePending = openText !== undefined
  let shift: number | undefined
  const closeOpenText = (): Array<CanonicalEvent> => {
    if (!mergePending || openText === undefined) return []
    mergePending = false
    return [{ type: "block_stop", index: openText }]
  }
  return (event: CanonicalEvent): ReadonlyArray<CanonicalEvent> => {
    switch (event.type) {
      case "message_start":
        return []
      case "block_start": {
        if (shift !== undefined) return [{ ...event, index: event.index + shift }]
        if (mergePending && openText !== undefined && event.block.type === "text") {
          mergePending = false
          shift = openText - event.index // its first text block continues the open one
          return []
        }
        const closing = closeOpenText()
        shift = (openText === undefined ? sent.nextIndex : openText + 1) - event.index
        return [...closing, { ...event, index: event.index + shift }]
      }
      case "message_stop":
        return [...closeOpenText(), event]
      default:
        return [{ ...event, index: event.index + (shift ?? 0) }]
    }
  }
}
