/** Random secrets and their hashes. Keys are high-entropy, so one SHA-256 is the right hash (as for GitHub tokens). */
import { createHash, randomBytes, timingSafeEqual } from "node:crypto"

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

/** `bytes` random bytes written in base62 (no `-`/`_`, so a double-click selects the whole key). */
export const randomBase62 = (bytes: number): string => {
  let n = BigInt("0x" + takeRandom(bytes).toString("hex"))
  const length = Math.ceil((bytes * 8) / Math.log2(62))
  let out = ""
  for (let i = 0; i < length; i++) {
    out = BASE62[Number(n % 62n)] + out
    n /= 62n
  }
  return out
}

/** An API key: `svc_` + 32 random bytes. */
export const newApiKeySecret = () => `svc_${randomBase62(32)}`
export const newAdminToken = () => `svcadm_${randomBase62(32)}`
export const newId = (prefix: string) => `${prefix}_${randomBase62(12)}`

export const sha256Hex = (secret: string) => createHash("sha256").update(secret).digest("hex")

/** Constant-time comparison of a presented secret with a known one. */
export const secretsEqual = (presented: string, expected: string) =>
  timingSafeEqual(createHash("sha256").update(presented).digest(), createHash("sha256").update(expected).digest())

/** What lists show instead of a secret: enough to recognise it, never enough to use it. */
export const hintOf = (secret: string) => `${secret.slice(0, 8)}…${secret.slice(-4)}`
