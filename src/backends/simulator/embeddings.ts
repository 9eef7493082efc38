/**
 * Lexical embeddings by feature hashing: texts that share words and word fragments point in
 * similar directions, unrelated texts are near-orthogonal. Not semantic (synonyms do not match),
 * but deterministic, cheap and good enough to exercise retrieval code end to end.
 *
 * Features: every lowercased word (letters and digits) with weight 1, and every character trigram
 * of `#word#` with weight 0.5 (so `running` and `runner` overlap). Each feature is hashed to a
 * bucket in [0, dimensions) and a sign (±1, from an independent hash, so collisions cancel out on
 * average instead of piling up). The vector is L2-normalized; an empty text maps to the first
 * basis vector so that every vector has length 1.
 */
import { avalanche, FNV_OFFSET, fnvRange, fnvStep } from "./prng.ts"

const WORD_WEIGHT = 1
const TRIGRAM_WEIGHT = 0.5
const SIGN_SEED = 0x9e3779b9

/** FNV-1a over `text` from `seed`, to be continued (prng.ts `hashString` in parts). */
const fnvOf = (text: string, seed: number) => fnvRange(seed >>> 0, text, 0, text.length)
// A feature's hash is FNV-1a over `w:word` or `t:abc`, continued from these prefix states
// character by character, so neither a word's nor a trigram's string is ever built.
const WORD_STATE = fnvOf("w:", FNV_OFFSET)
const WORD_SIGN_STATE = fnvOf("w:", SIGN_SEED)
const TRIGRAM_STATE = fnvOf("t:", FNV_OFFSET)
const TRIGRAM_SIGN_STATE = fnvOf("t:", SIGN_SEED)
const PAD = 0x23 // `#`, around every word

const addFeature = (vector: Array<number>, bucketHash: number, signHash: number, weight: number) => {
  const bucket = avalanche(bucketHash) % vector.length
  vector[bucket] += (avalanche(signHash) & 1) === 0 ? weight : -weight
}

/** A text's embedding computed a slice at a time (see `hashingEmbedding`). */
export interface EmbeddingSteps {
  /** Computes the next slice of about `stepUnits` characters; false once the vector is complete. */
  next(): boolean
  /** The L2-normalized vector, once `next` returned false. */
  readonly vector: Array<number>
}

/** At most this many characters per regex call, so no single call scans a whole huge text. */
const SCAN = 4_096

export const hashingEmbeddingSteps = (text: string, dimensions: number, stepUnits = 8_192): EmbeddingSteps => {
  const vector = new Array<number>(dimensions).fill(0)
  const lower = text.toLowerCase()
  const wordPart = new RegExp(`[\\p{L}\\p{N}]{1,${SCAN}}`, "uy")
  const gapPart = new RegExp(`[^\\p{L}\\p{N}]{1,${SCAN}}`, "uy")
  let at = 0
  let done = false
  // The word being read: its feature hashes so far and the last two characters of `#word`.
  let inWord = false
  let wordHash = 0
  let wordSignHash = 0
  let beforeLast = -1
  let lastCode = PAD
  const trigram = (a: number, b: number, c: number) =>
    addFeature(vector, fnvStep(fnvStep(fnvStep(TRIGRAM_STATE, a), b), c), fnvStep(fnvStep(fnvStep(TRIGRAM_SIGN_STATE, a), b), c), TRIGRAM_WEIGHT)
  const endWord = () => {
    trigram(beforeLast, lastCode, PAD)
    addFeature(vector, wordHash, wordSignHash, WORD_WEIGHT)
    inWord = false
  }
  const finish = () => {
    if (inWord) endWord()
    done = true
    let squares = 0
    for (const x of vector) squares += x * x
    const norm = Math.sqrt(squares)
    if (norm === 0) vector[0] = 1
    else for (let i = 0; i < vector.length; i++) vector[i] = vector[i] / norm
  }
  return {
    next() {
      if (done) return false
      const stepEnd = at + stepUnits
      while (at < stepEnd) {
        if (at >= lower.length) {
          finish()
          return false
        }
        wordPart.lastIndex = at
        const word = wordPart.exec(lower)
        if (word === null) {
          if (inWord) endWord()
          gapPart.lastIndex = at
          gapPart.exec(lower)
          at = gapPart.lastIndex
          continue
        }
        if (!inWord) {
          inWord = true
          wordHash = WORD_STATE
          wordSignHash = WORD_SIGN_STATE
          beforeLast = -1
          lastCode = PAD
        }
        const part = word[0]
        for (let i = 0; i < part.length; i++) {
          const code = part.charCodeAt(i)
          wordHash = fnvStep(wordHash, code)
          wordSignHash = fnvStep(wordSignHash, code)
          if (beforeLast !== -1) trigram(beforeLast, lastCode, code)
          beforeLast = lastCode
          lastCode = code
        }
        at = wordPart.lastIndex
      }
      return true
    },
    vector
  }
}

/**
 * One text's embedding at once (tests). The simulator runs `hashingEmbeddingSteps` with yields
 * between the steps: a 1 MiB text costs tens of ms.
 */
export const hashingEmbedding = (text: string, dimensions: number): Array<number> => {
  const steps = hashingEmbeddingSteps(text, dimensions)
  while (steps.next());
  return steps.vector
}

/** Cosine similarity of two equal-length vectors. */
export const cosineSimilarity = (a: ReadonlyArray<number>, b: ReadonlyArray<number>): number => {
  let dot = 0
  let normA = 0
  let normB = 0
  for (let i = 0; i < a.length; i++) {
    dot += a[i] * b[i]
    normA += a[i] * a[i]
    normB += b[i] * b[i]
  }
  return normA === 0 || normB === 0 ? 0 : dot / Math.sqrt(normA * normB)
}
