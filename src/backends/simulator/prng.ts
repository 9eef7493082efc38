/**
 * Deterministic randomness for the simulator: a string hash to derive seeds and a small seeded
 * generator (mulberry32). Same seed, same sequence, on every machine and every run.
 */

/** 32-bit FNV-1a over UTF-16 code units; `seed` chains hashes (`hashString(b, hashString(a))`). */
export const hashString = (text: string, seed = 0x811c9dc5): number => {
  let hash = seed >>> 0
  for (let i = 0; i < text.length; i++) {
    hash ^= text.charCodeAt(i)
    hash = Math.imul(hash, 0x01000193)
  }
  // Final avalanche (from murmur3) so similar inputs give unrelated seeds.
  hash ^= hash >>> 16
  hash = Math.imul(hash, 0x85ebca6b)
  hash ^= hash >>> 13
  hash = Math.imul(hash, 0xc2b2ae35)
  hash ^= hash >>> 16
  return hash >>> 0
}

/** One seed from several parts; `undefined` parts still shift the result (position matters). */
export const seedFrom = (parts: ReadonlyArray<string | number | undefined>): number =>
  parts.reduce<number>((hash, part) => hashString(`${part === undefined ? "\u0000" : String(part)}\u0001`, hash), 0x811c9dc5)

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
