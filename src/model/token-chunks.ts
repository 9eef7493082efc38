/**
 * How a text is cut for BPE so that counting it takes time linear in its length (used by
 * `bpe.ts`, in the tokenizer worker; `token-bound.ts` relies on where cuts can fall). Loads no
 * tokenizer tables: only the o200k split regex.
 *
 * BPE merges inside one pre-token (the split regex's unit: a word, a run of punctuation or emoji,
 * a run of spaces) in time quadratic in its length, and a pre-token has no length limit — 256 KB
 * of `A` is one pre-token and took 16 s. A pre-token longer than MAX_CHUNK_UNITS UTF-16 code
 * units is cut into chunks of at most that length, each encoded on its own. Natural text almost
 * never has such pre-tokens (long compounds, Thai or unpunctuated CJK sentences); for those the
 * count differs from an unbounded BPE by about one token per cut (Thai prose +3%, README 0.03%).
 *
 * Measured (one core, 1 MiB, worst input classes): random CJK ~0.8 s, emoji or random lowercase
 * ~0.4 s, `A`×1M 0.1–0.3 s; 32 units halves those and doubles the error on Thai and German
 * compounds, 128 doubles them and removes it. 64 is the middle.
 */
import { O200K_TOKEN_SPLIT_REGEX } from "gpt-tokenizer/encodingParams/constants"

/** Longest piece handed to BPE, in UTF-16 code units. */
export const MAX_CHUNK_UNITS = 64

/** Longest stretch of short pre-tokens handed to the library in one call (a couple of ms at most). */
const MAX_RUN_UNITS = 16_384

const isLower = (code: number) => code >= 0x61 && code <= 0x7a
const isHighSurrogate = (code: number) => code >= 0xd800 && code <= 0xdbff
const isLowSurrogate = (code: number) => code >= 0xdc00 && code <= 0xdfff

/**
 * Where the chunk of `text` that starts at `start` ends (`end`: the pre-token's end):
 * MAX_CHUNK_UNITS further on, moved back to the start of a lowercase word it would split when
 * that word (with the space before it) is at most MAX_CHUNK_UNITS / 2 long — the token bound
 * counts on those never being cut — and never inside a surrogate pair.
 */
const cutPoint = (text: string, start: number, end: number): number => {
  let cut = start + MAX_CHUNK_UNITS
  if (cut >= end) return end
  if (isLower(text.charCodeAt(cut))) {
    let wordStart = cut
    while (wordStart > start && isLower(text.charCodeAt(wordStart - 1))) wordStart--
    if (wordStart > start && text.charCodeAt(wordStart - 1) === 0x20) wordStart--
    // The scan forward stops once the word is known to be long, so cutting stays linear.
    const shortEnd = Math.min(end, wordStart + MAX_CHUNK_UNITS / 2 + 1)
    let wordEnd = cut
    while (wordEnd < shortEnd && isLower(text.charCodeAt(wordEnd))) wordEnd++
    // A short word moves whole to the next chunk (it starts past this chunk's middle, so the
    // chunk stays at least half full); a long one is cut where it is.
    if (wordStart !== cut && wordEnd - wordStart <= MAX_CHUNK_UNITS / 2) cut = wordStart
  }
  if (isLowSurrogate(text.charCodeAt(cut)) && isHighSurrogate(text.charCodeAt(cut - 1))) cut--
  return cut
}

/**
 * The text in the pieces BPE is given, one at a time: consecutive short pre-tokens go together
 * (up to MAX_RUN_UNITS), since the library splits them again exactly as here and is fastest on
 * long texts; a long pre-token goes in chunks. A run ends at a pre-token boundary, where the
 * split regex gives the same pre-tokens on the run alone as on the whole text (its alternatives
 * are greedy and look ahead only at whitespace).
 */
export function* chunksOf(text: string): Generator<string, void> {
  let runStart = 0
  for (const match of text.matchAll(O200K_TOKEN_SPLIT_REGEX)) {
    const piece = match[0]
    const at = match.index
    if (piece.length <= MAX_CHUNK_UNITS) {
      if (at + piece.length - runStart > MAX_RUN_UNITS) {
        if (at > runStart) yield text.slice(runStart, at)
        runStart = at
      }
      continue
    }
    if (at > runStart) yield text.slice(runStart, at)
    for (let start = 0; start < piece.length;) {
      const cut = cutPoint(piece, start, piece.length)
      yield piece.slice(start, cut)
      start = cut
    }
    runStart = at + piece.length
  }
  if (runStart < text.length) yield text.slice(runStart)
}
