/**
 * Identifiers: a prefix and random base62 characters (`run_…`, `msgbatch_…`), drawn from a pool of
 * CSPRNG bytes. Secrets (API keys, admin tokens) use the same alphabet: src/keys/secrets.ts.
 */
import { randomBytes } from "node:crypto"

const BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
const BASE62_CODES = Array.from(BASE62, (c) => c.charCodeAt(0))

// Ids are minted several times per request: draw them from a pool of CSPRNG bytes refilled 4 KiB
// at a time instead of one `randomBytes` call (a synchronous fill) per id.
let pool = Buffer.alloc(0)
let offset = 0
/** The next random byte of the pool (read in place: a `subarray` per id was a Buffer object each). */
const nextRandomByte = (): number => {
  if (offset >= pool.length) {
    pool = randomBytes(4096)
    offset = 0
  }
  return pool[offset++]!
}

/**
 * As many base62 characters as carry `bytes` random bytes (no `-`/`_`, so a double-click selects
 * the whole key). Each character is drawn uniformly by rejection sampling: a byte of 248 or more
 * (= 4 × 62) is skipped, so `byte % 62` has no bias.
 */
export const randomBase62 = (bytes: number): string => {
  const length = Math.ceil((bytes * 8) / Math.log2(62))
  // Character codes first, one string at the end: `out += c` per character built a chain of
  // short-lived strings (≈0.5 KiB per id, several ids per request).
  const codes = new Array<number>(length)
  let n = 0
  while (n < length) {
    const byte = nextRandomByte()
    if (byte < 248) codes[n++] = BASE62_CODES[byte % 62]!
  }
  return String.fromCharCode.apply(null, codes)
}

/** A new id: `prefix_` and 12 random bytes in base62 (17 characters). */
export const newId = (prefix: string) => `${prefix}_${randomBase62(12)}`
