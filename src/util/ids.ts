/**
 * Identifiers: a prefix and random base62 characters (`run_…`, `msgbatch_…`), drawn from a pool of
 * CSPRNG bytes. Secrets (API keys, admin tokens) use the same alphabet: src/keys/secrets.ts.
 */
import { randomBytes } from "node:crypto"

const BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

// Ids are minted several times per request: draw them from a pool of CSPRNG bytes refilled 4 KiB
// at a time instead of one `randomBytes` call (a synchronous fill) per id.
let pool = Buffer.alloc(0)
let offset = 0
const takeRandom = (bytes: number): Buffer => {
  if (offset + bytes > pool.length) {
    pool = randomBytes(Math.max(4096, bytes))
    offset = 0
  }
  const out = pool.subarray(offset, offset + bytes)
  offset += bytes
  return out
}

/**
 * As many base62 characters as carry `bytes` random bytes (no `-`/`_`, so a double-click selects
 * the whole key). Each character is drawn uniformly by rejection sampling: a byte of 248 or more
 * (= 4 × 62) is skipped, so `byte % 62` has no bias.
 */
export const randomBase62 = (bytes: number): string => {
  const length = Math.ceil((bytes * 8) / Math.log2(62))
  let out = ""
  while (out.length < length) {
    const chunk = takeRandom(length - out.length + 4)
    for (let i = 0; i < chunk.length && out.length < length; i++) {
      if (chunk[i] < 248) out += BASE62[chunk[i] % 62]
    }
  }
  return out
}

/** A new id: `prefix_` and 12 random bytes in base62 (17 characters). */
export const newId = (prefix: string) => `${prefix}_${randomBase62(12)}`
