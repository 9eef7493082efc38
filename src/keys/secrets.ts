/** Random secrets and their hashes. Keys are high-entropy, so one SHA-256 is the right hash (as for GitHub tokens). */
import { createHash, hash, randomBytes, timingSafeEqual } from "node:crypto"

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

/** An API key: `svc_` + 32 random bytes. */
export const newApiKeySecret = () => `svc_${randomBase62(32)}`
export const newAdminToken = () => `svcadm_${randomBase62(32)}`
export const newId = (prefix: string) => `${prefix}_${randomBase62(12)}`

export const sha256Hex = (secret: string) => hash("sha256", secret, "hex")

/** Constant-time comparison of a presented secret with a known one. */
export const secretsEqual = (presented: string, expected: string) =>
  timingSafeEqual(createHash("sha256").update(presented).digest(), createHash("sha256").update(expected).digest())

/** What lists show instead of a secret: enough to recognise it, never enough to use it. */
export const hintOf = (secret: string) => `${secret.slice(0, 8)}…${secret.slice(-4)}`
