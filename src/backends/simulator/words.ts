/**
 * The simulator's prose: readable pseudo-English from a fixed vocabulary, so tests can rely on it.
 *
 * Guarantees (documented for tests of stop sequences and truncation):
 * - every sentence contains the word `the` in lowercase, surrounded by spaces (` the `);
 * - every sentence starts with a capital letter and ends with `.`; sentences are joined by one
 *   space; there are no newlines, digits or other punctuation besides `,` after an adverb;
 * - every word comes from `SIMULATOR_VOCABULARY`.
 */
import { Effect } from "effect"
import { countTexts } from "../../model/tokenizer.ts"
import type { Prng } from "./prng.ts"

const adjectives = [
  "quiet", "bright", "small", "ancient", "green", "distant", "gentle", "curious", "silver", "warm",
  "narrow", "simple"
] as const
const nouns = [
  "river", "garden", "lantern", "mountain", "window", "harbor", "forest", "letter", "bridge", "meadow",
  "library", "signal", "valley", "engine", "market", "compass"
] as const
const verbs = [
  "moves", "rests", "waits", "travels", "drifts", "settles", "glows", "turns", "listens", "wanders"
] as const
const prepositions = ["across", "beyond", "near", "under", "beside", "toward", "along", "around", "over"] as const
const adverbs = ["quietly", "slowly", "often", "gently", "later", "again", "soon", "sometimes"] as const
const glue = ["the", "a", "and", "every"] as const

/** Every word the prose can contain (lowercase). */
export const SIMULATOR_VOCABULARY: ReadonlyArray<string> = [
  ...glue, ...adjectives, ...nouns, ...verbs, ...prepositions, ...adverbs
]

const capitalize = (text: string): string => text.charAt(0).toUpperCase() + text.slice(1)

/** Sentence shapes as word lists; each one has a lowercase `the` in the middle. */
const templates: ReadonlyArray<(p: Prng) => ReadonlyArray<string>> = [
  (p) => ["the", p.pick(adjectives), p.pick(nouns), p.pick(verbs), p.pick(prepositions), "the", p.pick(nouns)],
  (p) => [`${p.pick(adverbs)},`, "the", p.pick(nouns), p.pick(verbs), p.pick(prepositions), "the", p.pick(adjectives), p.pick(nouns)],
  (p) => ["every", p.pick(nouns), p.pick(verbs), p.pick(prepositions), "the", p.pick(nouns), p.pick(adverbs)],
  (p) => ["a", p.pick(adjectives), p.pick(nouns), "and", "the", p.pick(nouns), p.pick(verbs), p.pick(prepositions), "a", p.pick(nouns)]
]

const composeSentence = (prng: Prng): string => `${capitalize(prng.pick(templates)(prng).join(" "))}.`

/** A sentence is at least this many tokens (7 words and a full stop), so a batch never overshoots by much. */
const MIN_SENTENCE_TOKENS = 8

/**
 * Whole sentences until the text holds at least `minTokens` tokens (at least one sentence). The
 * sentences are drawn in batches and counted in one round trip to the tokenizer thread; drawing
 * more than are kept changes nothing, since each sentence depends only on the draws before it.
 */
export const composeProse = Effect.fnUntraced(function*(prng: Prng, minTokens: number): Effect.fn.Return<string> {
  const sentences: Array<string> = []
  let tokens = 0
  do {
    const batch = Array.from({ length: Math.max(1, Math.ceil((minTokens - tokens) / MIN_SENTENCE_TOKENS)) }, () => composeSentence(prng))
    // Each sentence after the first is preceded by a space, which BPE folds into its first word.
    const counts = yield* countTexts(batch.map((sentence, i) => (sentences.length + i === 0 ? sentence : ` ${sentence}`)))
    for (let i = 0; i < batch.length && (tokens < minTokens || sentences.length === 0); i++) {
      tokens += counts[i]
      sentences.push(batch[i])
    }
  } while (tokens < minTokens)
  return sentences.join(" ")
})
