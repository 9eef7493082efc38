/**
 * Deterministic randomness for the simulator: a string hash to derive seeds and a small seeded
 * generator (mulberry32). Same seed, same sequence, on every machine and every run.
 */
import { Effect } from "effect"

export const FNV_OFFSET = 0x811c9dc5

/** One FNV-1a step: `hash` continued by one UTF-16 code unit (no avalanche). */
export const fnvStep = (hash: number, code: number): number => Math.imul(hash ^ code, 0x01000193)

/** FNV-1a over `text[from, to)`, continuing from `hash`, without the final avalanche. */
export const fnvRange = (hash: number, text: string, from: number, to: number): number => {
  for (let i = from; i < to; i++) hash = fnvStep(hash, text.charCodeAt(i))
  return hash
}

/** The final avalanche (from murmur3), so similar inputs give unrelated seeds. */
export const avalanche = (hash: number): number => {
  hash ^= hash >>> 16
  hash = Math.imul(hash, 0x85ebca6b)
  hash ^= hash >>> 13
  hash = Math.imul(hash, 0xc2b2ae35)
  hash ^= hash >>> 16
  return hash >>> 0
}

/** 32-bit FNV-1a over UTF-16 code units; `seed` chains hashes (`hashString(b, hashString(a))`). */
export const hashString = (text: string, seed = FNV_OFFSET): number => avalanche(fnvRange(seed >>> 0, text, 0, text.length))

/** Characters hashed between two yields to the event loop (well under a millisecond). */
const HASH_SLICE_UNITS = 131_072

/**
 * `hashString` of the concatenation of `parts`, computed a slice at a time with yields between
 * slices, so hashing a prompt of any size never holds the event loop for long.
 */
export const hashParts = Effect.fnUntraced(function*(parts: ReadonlyArray<string>, seed = FNV_OFFSET): Effect.fn.Return<number> {
  let hash = seed >>> 0
  let sinceYield = 0
  for (const part of parts) {
    for (let from = 0; from < part.length; from += HASH_SLICE_UNITS) {
      const to = Math.min(part.length, from + HASH_SLICE_UNITS)
      hash = fnvRange(hash, part, from, to)
      sinceYield += to - from
      if (sinceYield >= HASH_SLICE_UNITS) {
        yield* Effect.yieldNow
        sinceYield = 0
      }
    }
  }
  return avalanche(hash)
})

/** One seed from several parts; `undefined` parts still shift the result (position matters). */
export const seedFrom = (parts: ReadonlyArray<string | number | undefined>): number =>
  parts.reduce<number>((hash, part) => hashString(`${part === undefined ? "\u0000" : String(part)}\u0001`, hash), FNV_OFFSET)

export interface Prng {
  /** Uniform in [0, 1). */
  next(): number
  /** Uniform integer in [min, max], both included. */
  int(min: number, max: number): number
  pick<A>(items: ReadonlyArray<A>): A
  chance(probability: number): boolean
  /** `length` lowercase hex digits. */
  hex(length: number): string
}

export const makePrng = (seed: number): Prng => {
  let state = seed >>> 0
  const next = (): number => {
    state = (state + 0x6d2b79f5) >>> 0
    let t = state
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
  const int = (min: number, max: number): number => min + Math.floor(next() * (max - min + 1))
  return {
    next,
    int,
    pick: (items) => items[int(0, items.length - 1)],
    chance: (probability) => next() < probability,
    hex: (length) => {
      let out = ""
      while (out.length < length) out += int(0, 15).toString(16)
      return out
    }
  }
}
