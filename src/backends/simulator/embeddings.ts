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
import { hashString } from "./prng.ts"

const WORD_WEIGHT = 1
const TRIGRAM_WEIGHT = 0.5
const SIGN_SEED = 0x9e3779b9

const addFeature = (vector: Array<number>, feature: string, weight: number) => {
  const bucket = hashString(feature) % vector.length
  const sign = (hashString(feature, SIGN_SEED) & 1) === 0 ? 1 : -1
  vector[bucket] += sign * weight
}

export const hashingEmbedding = (text: string, dimensions: number): Array<number> => {
  const vector = new Array<number>(dimensions).fill(0)
  for (const word of text.toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? []) {
    addFeature(vector, `w:${word}`, WORD_WEIGHT)
    const padded = `#${word}#`
    for (let i = 0; i + 3 <= padded.length; i++) addFeature(vector, `t:${padded.slice(i, i + 3)}`, TRIGRAM_WEIGHT)
  }
  let squares = 0
  for (const x of vector) squares += x * x
  const norm = Math.sqrt(squares)
  if (norm === 0) {
    vector[0] = 1
    return vector
  }
  return vector.map((x) => x / norm)
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
