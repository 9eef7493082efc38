/**
 * Continuity after the first byte: whether a broken stream may go on elsewhere, and how a
 * continuation's events are spliced into what was sent (`SentState`, which `Delivered` in
 * delivered.ts keeps as the stream goes).
 *
 * A break may continue only in plain text: no tool call was started (its arguments cannot be
 * resumed faithfully) and no non-text block is open. The continuation is a fresh call (the
 * caller's `resume(textSoFar)` puts the text so far as an assistant prefix), so its events are
 * renumbered: its `message_start` is dropped, its first text block continues the client's open
 * text block, and later blocks follow the client's numbering. `message_stop` (and its usage) is
 * the continuation's: usage of the broken attempt is not known (it never sent `message_stop`).
 */
import type { BlockStart, CanonicalEvent } from "../model/events.ts"

export interface SentState {
  /** Every text delta sent so far, concatenated. */
  readonly text: string
  /** The block the client has open, if any. */
  readonly open: { readonly index: number; readonly type: BlockStart["type"] } | undefined
  /** The index the next new block gets on the client's side. */
  readonly nextIndex: number
  readonly sawToolUse: boolean
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
