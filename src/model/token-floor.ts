/**
 * A safe lower bound on the o200k_base tokens of text seen as it streams, without the tokenizer:
 * what proves an upstream sent more output than it was asked for (`runtime/delivered.ts`). The
 * counterpart of `token-bound.ts` (an upper bound, for what metering reserves). Constant work per
 * character, constant memory, and the text may arrive cut anywhere.
 *
 * ## Why it never overcounts (the exact count is `bpe.ts`: pre-tokens, long ones cut in chunks)
 *
 * Tokens never span two pre-tokens, and each pre-token is at least one token. The bound is the
 * largest of three counts, each at most the number of pre-tokens or of tokens:
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
 * - **Words**, in any script: a character that is not whitespace, after a gap that holds a space,
 *   a tab, a VT or an FF (or at the text's start), counts one. No pre-token holds such a gap
 *   character between two that are not whitespace: in the split regex a space or a tab is only
 *   ever a pre-token's first character, or inside a run of whitespace alone. Line ends and other
 *   Unicode whitespace neither count nor make a gap: `[^\s\p{L}\p{N}]+[\r\n/]*` makes one pre-token
 *   of `.\n/`, and `\s+(?!\S)` one of a space, NBSP, space, NBSP.
 * - **Length.** No o200k token is longer than 128 UTF-16 units (nor 128 bytes: the longest is 128
 *   spaces), so a text of n units has at least ⌈n / 128⌉ tokens.
 * - **Bytes beyond ASCII.** Tokens are runs of the text's UTF-8 bytes, and none holds more than 60
 *   bytes of non-ASCII characters (a Thai phrase), so b such bytes take at least ⌈b / 60⌉ tokens.
 *   Counted low where unsure: 2 bytes per UTF-16 unit of a surrogate pair (4 for the pair), 2 for
 *   a lone one (the encoder writes 3).
 * - **CJK characters** (Han ideographs, kana, Hangul syllables: 3 bytes each): no token holds more
 *   than 33 bytes of them, counting a character cut at a token's edge as one of them (11 whole
 *   ones: ありがとうございました), so c of them take at least ⌈c / 11⌉ tokens.
 * `test/model/token-floor.test.ts` reads these maxima from the vocabulary itself.
 * How close: 0.62 of the exact count on this project's README (English with markdown and figures),
 * 0.48 on TypeScript, 0.38 on JSON; on text of scripts written with spaces, the words; on Chinese,
 * Japanese and Thai, written without them, the last two counts (~0.1).
 */

/** The most UTF-16 units (and UTF-8 bytes) any o200k_base token has. */
export const MAX_TOKEN_UNITS = 128
/** The most UTF-8 bytes of non-ASCII characters any o200k_base token has. */
export const MAX_TOKEN_WIDE_BYTES = 60
/** The most CJK characters any o200k_base token has (its bytes of them ÷ 3, a cut one counted). */
export const MAX_TOKEN_CJK = 11

/** Han ideographs (with extension A and the compatibility block), kana, Hangul syllables. */
export const isCjk = (code: number) =>
  (code >= 0x4e00 && code <= 0x9fff) || (code >= 0xac00 && code <= 0xd7af) || (code >= 0x3040 && code <= 0x30ff) ||
  (code >= 0x3400 && code <= 0x4dbf) || (code >= 0xf900 && code <= 0xfaff)

const APOSTROPHE = 0x27

/** Whitespace to the split regex's `\s` beyond ASCII (the ECMAScript set). */
const isUnicodeSpace = (code: number) =>
  code === 0x85 || code === 0xa0 || code === 0x1680 || (code >= 0x2000 && code <= 0x200a) || code === 0x2028 || code === 0x2029 ||
  code === 0x202f || code === 0x205f || code === 0x3000 || code === 0xfeff

export class TokenFloor {
  #units = 0
  /** Letter runs plus digit groups so far. */
  #counted = 0
  /** Whether the last character seen was in a letter run (a run may go on in the next piece). */
  #inRun = false
  /** ASCII digits in the current digit run. */
  #digits = 0
  /** Words: runs of characters after a gap with a space, tab, VT or FF in it (or at the start). */
  #words = 0
  /** Whether such a gap has been seen since the last character of a word. */
  #spaced = true
  /** UTF-8 bytes of non-ASCII characters (low where unsure). */
  #wideBytes = 0
  /** CJK characters. */
  #cjk = 0

  add(text: string): void {
    let counted = this.#counted
    let inRun = this.#inRun
    let digits = this.#digits
    let words = this.#words
    let spaced = this.#spaced
    let wideBytes = this.#wideBytes
    let cjk = this.#cjk
    for (let i = 0; i < text.length; i++) {
      const code = text.charCodeAt(i)
      if (code === 0x20 || code === 0x09 || code === 0x0b || code === 0x0c) {
        spaced = true
        inRun = false
        digits = 0
        continue
      }
      if (spaced && code !== 0x0a && code !== 0x0d && !(code >= 0x80 && isUnicodeSpace(code))) {
        words++
        spaced = false
      }
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
      } else if (code < 0x800 || (code >= 0xd800 && code <= 0xdfff)) wideBytes += 2
      else {
        wideBytes += 3
        if (isCjk(code)) cjk++
      }
    }
    this.#counted = counted
    this.#inRun = inRun
    this.#digits = digits
    this.#words = words
    this.#spaced = spaced
    this.#wideBytes = wideBytes
    this.#cjk = cjk
    this.#units += text.length
  }

  /** At most the exact o200k_base count of everything added, read as one text. */
  get tokens(): number {
    return Math.max(
      this.#counted,
      this.#words,
      Math.ceil(this.#units / MAX_TOKEN_UNITS),
      Math.ceil(this.#wideBytes / MAX_TOKEN_WIDE_BYTES),
      Math.ceil(this.#cjk / MAX_TOKEN_CJK)
    )
  }
}
