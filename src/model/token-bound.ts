/**
 * A safe upper bound on a text's o200k_base token count, without the tokenizer: what metering
 * reserves. Linear in the text (~15 ms per MiB of English, 3–5 ms per MiB of other text), on
 * ~80 KB of tables instead of the tokenizer's ~70 MiB, and no slow input: an exact count takes
 * 2–6× as long on English (warm or cold) and up to 0.8 s per MiB on hostile input.
 *
 * How tight: about 2× the exact count on English prose, 2.5× on code, 1.6× on JSON; plain UTF-8
 * bytes (the bound for everything else) are 3.75×, 4.2×, 2.3×, and 3–10× on CJK, emoji or
 * Cyrillic. A tighter safe bound needs more of the vocabulary (checking only 2-character
 * tokens gives 2.8× on English; all tokens up to 6 characters are half the vocabulary), and
 * then it costs what the exact count costs.
 *
 * ## Why it never undercounts (`exact` is `bpe.ts`: pre-tokens, long ones cut in chunks)
 *
 * (1) The exact count is the sum, over its BPE units (pre-tokens or chunks), of the tokens BPE
 *     leaves in each. BPE merges adjacent parts while some adjacent pair concatenates to a token
 *     of the vocabulary V, so the tokens t1…tk it leaves in a unit satisfy:
 *       (V) every ti is in V;   (I) no ti·ti+1 is in V.
 *     (A unit that is itself in V is one token, which satisfies both.)
 * (2) The bound splits the text into regions: *words* — a run of ASCII lowercase letters, with
 *     the space before it when there is one, of at most MAX_CHUNK_UNITS / 2 characters — and the
 *     rest. Assign every exact token to the region holding its first byte. A region of the rest
 *     gets at most one token per UTF-8 byte (tokens are never empty), which it is charged. Digits
 *     are the exception: a run of ASCII digits between non-digits is cut by the split regex
 *     (`\p{N}{1,3}`) into groups of 3 from its start, and every 1–3 digit string is one token
 *     (checked against V by the test), so it is charged one per group — unless a non-ASCII
 *     character (maybe a `\p{N}` digit that would shift the groups) touches it: then its bytes.
 * (3) A word lies inside one BPE unit: the split regex never ends a pre-token between two
 *     lowercase letters (its letter alternatives are greedy and only a contraction suffix such as
 *     `'s` follows them — a word right after `'` is charged its bytes instead), a space right
 *     before a letter always starts that letter's pre-token, and bpe.ts never cuts a chunk inside
 *     a word. So the tokens that start in a word are a run of (V)/(I) tokens, except that
 *       - the first may be preceded by a token from the region before that runs into the word,
 *         unless the word starts at a pre-token start (after a space, a digit, a line break or at
 *         the text's start): "wild start", no (I) with what came before;
 *       - the last may run on past the word when the pre-token goes on (a `'` or a non-ASCII
 *         character follows): "wild end", no (V) nor (I) for it.
 *     `wordBound` is the largest number of tokens any such run can have: a dynamic programme
 *     over the word's positions, checking (V) and (I) only where V is known — strings of up to
 *     4 characters over [ a-z] (O200K_SHORT_WORDS, the whole of V there, checked by the test) —
 *     and allowing any token of 5 or more characters. Dropping constraints only admits more
 *     runs, so the maximum is at least the tokens BPE left there.
 * Summing (2) and (3) over the regions: exact ≤ bound. `test/model/token-bound.test.ts` checks
 * it over random strings (emoji, CJK, long runs, contractions, digits) against bpe.ts.
 */
import { isKept, substringOf } from "../util/long-strings.ts"
import { MAX_CHUNK_UNITS } from "./token-chunks.ts"
import { O200K_SHORT_WORDS } from "./o200k-words.ts"

const MAX_WORD = MAX_CHUNK_UNITS / 2
const SPACE = 0x20
const APOSTROPHE = 0x27
const isLower = (code: number) => code >= 0x61 && code <= 0x7a
const isDigit = (code: number) => code >= 0x30 && code <= 0x39

/** Keys of strings over [ a-z] of up to 4 characters: base 28, space 27, letters 1–26, never 0. */
const letterCode = (code: number) => (code === SPACE ? 27 : code - 0x60)
const KEY_SPACE = 28 ** 4

let knownWords: Uint8Array | undefined
/** A bitmap of O200K_SHORT_WORDS by key, built on first use (~1 ms). */
const shortWords = (): Uint8Array => {
  if (knownWords !== undefined) return knownWords
  const bits = new Uint8Array(KEY_SPACE / 8 + 1)
  for (const word of O200K_SHORT_WORDS) {
    let key = 0
    for (let i = 0; i < word.length; i++) key = key * 28 + letterCode(word.charCodeAt(i))
    bits[key >> 3] |= 1 << (key & 7)
  }
  knownWords = bits
  return bits
}

const NONE = -1
/** Results for words of up to MEMO_MAX_LENGTH characters, keyed by their codes and wildness. */
const wordMemo = new Map<number, number>()
const WORD_MEMO_ENTRIES = 16_384
const MEMO_MAX_LENGTH = 10 // 28^10 · 4 < 2^53

// Scratch space of wordBound: `last[i * 6 + l]`, the most tokens covering the word's first i
// characters with the last token l long (l = 5: any length from 5); `bestAt[i]` the most over
// every state at i, `bestUpTo[i]` over 0..i.
const codes = new Int32Array(MAX_WORD)
const last = new Int32Array((MAX_WORD + 1) * 6)
const bestAt = new Int32Array(MAX_WORD + 1)
const bestUpTo = new Int32Array(MAX_WORD + 1)

/** The most (V)/(I) tokens that can start in `text[from, to)`, a word (see above). */
const wordBound = (text: string, from: number, to: number, wildStart: boolean, wildEnd: boolean): number => {
  const n = to - from
  let memoKey = -1
  if (n <= MEMO_MAX_LENGTH) {
    memoKey = 0
    for (let i = from; i < to; i++) memoKey = memoKey * 28 + letterCode(text.charCodeAt(i))
    memoKey = memoKey * 4 + (wildStart ? 2 : 0) + (wildEnd ? 1 : 0)
    const memo = wordMemo.get(memoKey)
    if (memo !== undefined) return memo
  }
  const bits = shortWords()
  for (let i = 0; i < n; i++) codes[i] = letterCode(text.charCodeAt(from + i))
  /** Is word[a, b) (2 to 4 characters) in V? */
  const known = (a: number, b: number) => {
    let key = 0
    for (let i = a; i < b; i++) key = key * 28 + codes[i]
    return (bits[key >> 3] & (1 << (key & 7))) !== 0
  }
  for (let i = 0; i <= n; i++) {
    // Tokens may start at i with no (I) constraint: at the word's start, or anywhere before the
    // first token on a wild start.
    const open = i === 0 || wildStart ? 0 : NONE
    let best = open
    const row = i * 6
    for (let l = 1; l <= 5; l++) last[row + l] = NONE
    for (let l = 1; l <= 4 && l <= i; l++) {
      const start = i - l
      if (l >= 2 && !known(start, i)) continue // (V)
      let before = start === 0 || wildStart ? 0 : NONE
      for (let m = 1; m <= 5; m++) {
        const prior = last[start * 6 + m]
        if (prior === NONE || prior <= before) continue
        if (m + l <= 4 && known(start - m, i)) continue // (I)
        before = prior
      }
      if (before !== NONE) {
        last[row + l] = before + 1
        if (before + 1 > best) best = before + 1
      }
    }
    if (i >= 5) {
      last[row + 5] = bestUpTo[i - 5] + 1
      if (last[row + 5] > best) best = last[row + 5]
    }
    bestAt[i] = best
    bestUpTo[i] = i === 0 || best > bestUpTo[i - 1] ? best : bestUpTo[i - 1]
  }
  let result = wildStart ? 0 : NONE
  for (let l = 1; l <= 5; l++) if (last[n * 6 + l] > result) result = last[n * 6 + l]
  // A wild end: one more token from any position, running on past the word.
  if (wildEnd) for (let i = 0; i < n; i++) if (bestAt[i] !== NONE && bestAt[i] + 1 > result) result = bestAt[i] + 1
  if (memoKey !== -1) {
    if (wordMemo.size >= WORD_MEMO_ENTRIES) wordMemo.clear()
    wordMemo.set(memoKey, result)
  }
  return result
}

/** A digit run longer than this is charged its bytes (so it never has to be read whole at once). */
const MAX_DIGIT_RUN = 3_072

/** How far past a step's end `boundOfRange` may read: a run's look-ahead, and the character after it. */
const WINDOW_BEYOND = Math.max(MAX_WORD, MAX_DIGIT_RUN) + 2

/**
 * Charges `text[from, to)` (see the proof above); returns where it stopped: at `to`, or past it
 * to finish a short word or digit run. A long run (charged its bytes anyway) may be left midway,
 * so no step reads more than `to - from` + MAX_DIGIT_RUN characters; the next step then starts
 * inside it — the only way a step can start between two letters or two digits — and goes on
 * charging bytes.
 */
const boundOfRange = (text: string, from: number, to: number, sum: { tokens: number }): number => {
  let i = from
  const n = text.length
  if (i > 0 && i < n) {
    const inLetters = isLower(text.charCodeAt(i - 1)) && isLower(text.charCodeAt(i))
    const inDigits = isDigit(text.charCodeAt(i - 1)) && isDigit(text.charCodeAt(i))
    if (inLetters || inDigits) {
      const same = inLetters ? isLower : isDigit
      while (i < n && i < to && same(text.charCodeAt(i))) i++
      sum.tokens += i - from
    }
  }
  while (i < to) {
    const code = text.charCodeAt(i)
    const spaceLed = code === SPACE && i + 1 < n && isLower(text.charCodeAt(i + 1))
    if (isLower(code) || spaceLed) {
      let end = spaceLed ? i + 1 : i
      const lookAhead = Math.min(n, Math.max(to, i + MAX_WORD + 1))
      while (end < lookAhead && isLower(text.charCodeAt(end))) end++
      const before = i === 0 ? NONE : text.charCodeAt(i - 1)
      if (end - i > MAX_WORD || (!spaceLed && before === APOSTROPHE)) {
        sum.tokens += end - i // long (maybe left midway, see above), or right after a contraction
      } else {
        const wildStart = !spaceLed && before !== NONE && before !== 0x0a && before !== 0x0d && !isDigit(before)
        const after = end < n ? text.charCodeAt(end) : NONE
        const wildEnd = after === APOSTROPHE || after >= 0x80
        sum.tokens += wordBound(text, i, end, wildStart, wildEnd)
      }
      i = end
    } else if (isDigit(code)) {
      let end = i + 1
      const lookAhead = Math.min(n, Math.max(to, i + MAX_DIGIT_RUN + 1))
      while (end < lookAhead && isDigit(text.charCodeAt(end))) end++
      const asciiAround = (i === 0 || text.charCodeAt(i - 1) < 0x80) && (end === n || text.charCodeAt(end) < 0x80)
      sum.tokens += asciiAround && end - i <= MAX_DIGIT_RUN ? Math.ceil((end - i) / 3) : end - i
      i = end
    } else if (code < 0x80) {
      sum.tokens += 1
      i++
    } else if (code < 0x800) {
      sum.tokens += 2
      i++
    } else if (code >= 0xd800 && code <= 0xdbff && i + 1 < n && (text.charCodeAt(i + 1) & 0xfc00) === 0xdc00) {
      sum.tokens += 4 // a surrogate pair: one 4-byte character
      i += 2
    } else {
      sum.tokens += 3 // the rest of the BMP; a lone surrogate is encoded as U+FFFD, 3 bytes
      i++
    }
  }
  return i
}

/** An upper bound on the o200k_base tokens of `text` (see above). */
export const textTokenBound = (text: string): number => {
  const sum = { tokens: 0 }
  boundOfRange(text, 0, text.length, sum)
  return sum.tokens
}

/**
 * The same in steps of about `stepUnits` characters, so a caller can yield between them: each
 * call of `next()` charges the next step and returns false once the text is done. A class, not an
 * object of closures: a closure in an object literal made per request kept its scope (the request's
 * text) alive through young-generation collections (`bench/alloc-profile.ts --survivors`).
 */
class TokenBoundSteps {
  readonly #text: string
  readonly #stepUnits: number
  readonly #sum = { tokens: 0 }
  #at = 0
  // A long text the parser kept in pieces (util/long-strings.ts) is read a window at a time:
  // `charCodeAt` on the whole would flatten it, 30 MB written in one turn for a 30 MiB prompt.
  readonly #windowed: boolean
  constructor(text: string, stepUnits: number) {
    this.#text = text
    this.#stepUnits = stepUnits
    this.#windowed = isKept(text)
  }
  next(): boolean {
    const text = this.#text
    const at = this.#at
    if (at >= text.length) return false
    const to = Math.min(text.length, at + this.#stepUnits)
    if (!this.#windowed) this.#at = boundOfRange(text, at, to, this.#sum)
    else {
      // From the character before the step (whether it starts inside a run) to past the
      // furthest a step reads: its last run's look-ahead and the character after that run.
      const start = Math.max(0, at - 1)
      const window = substringOf(text, start, Math.min(text.length, to + WINDOW_BEYOND))
      this.#at = start + boundOfRange(window, at - start, to - start, this.#sum)
    }
    return this.#at < text.length
  }
  get tokens(): number {
    return this.#sum.tokens
  }
}

export const textTokenBoundSteps = (text: string, stepUnits: number): TokenBoundSteps => new TokenBoundSteps(text, stepUnits)
