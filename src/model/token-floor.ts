/**
 * A safe lower bound on the o200k_base tokens of text seen as it streams, without the tokenizer:
 * what proves an upstream sent more output than it was asked for (`runtime/delivered.ts`). The
 * counterpart of `token-bound.ts` (an upper bound, for what metering reserves). Constant work per
 * character, constant memory, and the text may arrive cut anywhere.
 *
 * ## Why it never overcounts (the exact count is `bpe.ts`: pre-tokens, long ones cut in chunks)
 *
 * Tokens never span two pre-tokens, and each pre-token is at least one token. The bound is the
 * larger of two counts, each at most the number of pre-tokens or of tokens:
 * - **Letter runs.** A maximal run of ASCII letters, joined across an apostrophe and across any
 *   non-ASCII character (they never split a run; they may join two), counts one. In the split
 *   regex the letters of one pre-token are contiguous — letters and marks, then at most a
 *   contraction (`'s`, `'t`, …; the ASCII apostrophe) — preceded by at most one other character.
 *   So no pre-token holds letters on both sides of an ASCII character that is neither a letter nor
 *   an apostrophe: two counted runs are in two pre-tokens. Words of other scripts are not counted
 *   here (only joined), so on them the bound is the other one.
 *   Plus one per started group of three in a run of ASCII digits, joined across non-ASCII
 *   characters: only the split regex's `\p{N}{1,3}` holds digits, and never letters, so these
 *   pre-tokens are others than the letter runs', and k digits take at least ⌈k / 3⌉ of them.
 * - **Length.** No o200k token is longer than 128 UTF-16 units (nor 128 bytes: the longest is 128
 *   spaces; `test/model/token-floor.test.ts` checks the vocabulary), so a text of n units has at
 *   least ⌈n / 128⌉ tokens.
 * How close: 0.62 of the exact count on this project's README (English with markdown and figures),
 * 0.48 on TypeScript, 0.38 on JSON. On text of other scripts, whitespace or punctuation only the
 * length bound speaks.
 */

/** The most UTF-16 units (and UTF-8 bytes) any o200k_base token has. */
export const MAX_TOKEN_UNITS = 128

const APOSTROPHE = 0x27

export class TokenFloor {
  #units = 0
  /** Letter runs plus digit groups so far. */
  #counted = 0
  /** Whether the last character seen was in a letter run (a run may go on in the next piece). */
  #inRun = false
  /** ASCII digits in the current digit run. */
  #digits = 0

  add(text: string): void {
    let counted = this.#counted
    let inRun = this.#inRun
    let digits = this.#digits
    for (let i = 0; i < text.length; i++) {
      const code = text.charCodeAt(i)
      const lower = code | 0x20
      if (lower >= 0x61 && lower <= 0x7a) {
        if (!inRun) counted++
        inRun = true
        digits = 0
      } else if (code >= 0x30 && code <= 0x39) {
        if (digits++ % 3 === 0) counted++
        inRun = false
      } else if (code < 0x80) {
        if (code !== APOSTROPHE) inRun = false
        digits = 0
      }
    }
    this.#counted = counted
    this.#inRun = inRun
    this.#digits = digits
    this.#units += text.length
  }

  /** At most the exact o200k_base count of everything added, read as one text. */
  get tokens(): number {
    return Math.max(this.#counted, Math.ceil(this.#units / MAX_TOKEN_UNITS))
  }
}
