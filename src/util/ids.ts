/**
 * Identifiers: a prefix and random base62 characters (`run_…`, `msgbatch_…`), drawn from a pool of
 * CSPRNG bytes. Secrets (API keys, admin tokens) use the same alphabet: src/keys/secrets.ts.
 */
import { randomBytes } from "node:crypto"

const BASE62_CODES = Buffer.from("0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz", "latin1")

// Ids are minted several times per request: draw them from a pool of CSPRNG bytes refilled 4 KiB
// at a time instead of one `randomBytes` call (a synchronous fill) per id.
let pool = Buffer.alloc(0)
let offset = 0
/**
 * The id being built, as latin1 bytes, and its length. One buffer reused for every id: an array
 * emptied (`length = 0`) and pushed to again grew a new backing store several times per id
 * (~1.5 KiB allocated per request for a few ids).
 */
let out = Buffer.alloc(128)
let length = 0

const put = (code: number) => {
  if (length === out.length) {
    const bigger = Buffer.alloc(out.length * 2)
    out.copy(bigger)
    out = bigger
  }
  out[length++] = code
}

/**
 * Appends `count` base62 characters. Each character is drawn uniformly by rejection sampling: a
 * byte of 248 or more (= 4 × 62) is skipped, so `byte % 62` has no bias.
 */
const appendBase62 = (count: number) => {
  for (let left = count; left > 0;) {
    if (offset >= pool.length) {
      pool = randomBytes(4096)
      offset = 0
    }
    const byte = pool[offset++]!
    if (byte < 248) {
      put(BASE62_CODES[byte % 62]!)
      left--
    }
  }
}

/**
 * The id built so far as one flat string (appending a character at a time, or
 * `${prefix}_${rest}`, makes a tree of V8 cons-strings, ~200 bytes more per id — and ids are
 * kept, e.g. the allowance remembers settled ones for ten minutes).
 */
const take = (): string => {
  const id = out.toString("latin1", 0, length)
  length = 0
  return id
}

/**
 * As many base62 characters as carry `bytes` random bytes (no `-`/`_`, so a double-click selects
 * the whole key).
 */
export const randomBase62 = (bytes: number): string => {
  length = 0
  appendBase62(Math.ceil((bytes * 8) / Math.log2(62)))
  return take()
}

/** A new id: `prefix_` and 12 random bytes in base62 (17 characters). */
export const newId = (prefix: string) => {
  length = 0
  for (let i = 0; i < prefix.length; i++) put(prefix.charCodeAt(i))
  put(95) // "_"
  appendBase62(17)
  return take()
}
