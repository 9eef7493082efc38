/**
 * Identifiers: a prefix and random base62 characters (`run_…`, `msgbatch_…`), drawn from a pool of
 * CSPRNG bytes. Secrets (API keys, admin tokens) use the same alphabet: src/keys/secrets.ts.
 */
import { randomBytes } from "node:crypto"

const BASE62_CODES = Array.from("0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz", (c) => c.charCodeAt(0))

// Ids are minted several times per request: draw them from a pool of CSPRNG bytes refilled 4 KiB
// at a time instead of one `randomBytes` call (a synchronous fill) per id.
let pool = Buffer.alloc(0)
let offset = 0
/** Char codes of the id being built (reused: ids are minted on the hot path). */
const codes: Array<number> = []

/**
 * Appends `length` base62 characters to `codes`. Each character is drawn uniformly by rejection
 * sampling: a byte of 248 or more (= 4 × 62) is skipped, so `byte % 62` has no bias.
 */
const appendBase62 = (length: number) => {
  for (let left = length; left > 0;) {
    if (offset >= pool.length) {
      pool = randomBytes(4096)
      offset = 0
    }
    const byte = pool[offset++]!
    if (byte < 248) {
      codes.push(BASE62_CODES[byte % 62]!)
      left--
    }
  }
}

/**
 * The string of `codes`, then cleared. One `fromCharCode` gives a flat string: appending one
 * character at a time (or `${prefix}_${rest}`) makes a tree of V8 cons-strings, ~200 bytes more per
 * id — and ids are kept, e.g. the allowance remembers settled ones for ten minutes.
 */
const takeCodes = (): string => {
  const out = String.fromCharCode.apply(null, codes)
  codes.length = 0
  return out
}

/**
 * As many base62 characters as carry `bytes` random bytes (no `-`/`_`, so a double-click selects
 * the whole key).
 */
export const randomBase62 = (bytes: number): string => {
  codes.length = 0
  appendBase62(Math.ceil((bytes * 8) / Math.log2(62)))
  return takeCodes()
}

/** A new id: `prefix_` and 12 random bytes in base62 (17 characters). */
export const newId = (prefix: string) => {
  codes.length = 0
  for (let i = 0; i < prefix.length; i++) codes.push(prefix.charCodeAt(i))
  codes.push(95) // "_"
  appendBase62(17)
  return takeCodes()
}
