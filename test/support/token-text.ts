/** Random text for the token bounds' properties (`token-bound.ts`, `token-floor.ts`). */
import { Arbitrary, Schema } from "effect"

/** Fragments that exercise every rule of the bound: words, contractions, case changes, digits, CJK, emoji, marks, surrogates. */
const FRAGMENTS = [
  "a", "e", "s", "t", "l", "q", "x", "the", "ing", " ", "  ", "\t", "\n", "\r\n", "'", "'s", "'ll", "'re", "A", "B", "Z", "HTTP",
  "0", "1", "23", "456", "7890", ".", ",", "(", ")", "\"", "-", "/", "_", "<|endoftext|>", "é", "É", "ß", "中", "文", "日本語",
  "ภาษา", "😀", "👍🏽", "❤️", "\u0301", "٣", "²", "\ud800", "\udc00", " hello", "Hello", "don't", "naïve",
  "\u2019", "it\u2019s", "a'b", "\u00a0", "x1y", "café", "snake_case", "camelCase", "e.g.", "--",
  "\u3000", "\u2028", "\u0085", ".\n/", "привет", " мир", "\t", "\u000b",
  // The vocabulary's tokens with the most CJK characters and the most non-ASCII bytes: repeated,
  // they are where the floor's counts of those come closest to the exact count.
  "ありがとうございました", " สำนักเลขานุการองค์กร", "微信公众号", "가나다라마바사"
] as const
const fragment = Arbitrary.schema(Schema.Literals(FRAGMENTS))
const count = Arbitrary.schema(Schema.Int.check(Schema.isBetween({ minimum: 1, maximum: 200 })))
/** A fragment, or a run of one repeated (long unbroken runs are where BPE is slow and chunks are cut). */
const piece = Arbitrary.all([fragment, count, Arbitrary.schema(Schema.Boolean)]).pipe(
  Arbitrary.map(([text, times, repeat]) => (repeat ? text.repeat(times) : text))
)
/** Text made of those pieces: what the token bounds are checked on against the exact count. */
export const tokenizerText = Arbitrary.array(piece, { maxLength: 40 }).pipe(Arbitrary.map((pieces) => pieces.join("")))
