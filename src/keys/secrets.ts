/** Random secrets and their hashes. Keys are high-entropy, so one SHA-256 is the right hash (as for GitHub tokens). */
import { createHash, hash, timingSafeEqual } from "node:crypto"
import { randomBase62 } from "../util/ids.ts"

/** An API key: `svc_` + 32 random bytes. */
export const newApiKeySecret = () => `svc_${randomBase62(32)}`
export const newAdminToken = () => `svcadm_${randomBase62(32)}`

export const sha256Hex = (secret: string) => hash("sha256", secret, "hex")

/** Constant-time comparison of a presented secret with a known one. */
export const secretsEqual = (presented: string, expected: string) =>
  timingSafeEqual(createHash("sha256").update(presented).digest(), createHash("sha256").update(expected).digest())

/** What lists show instead of a secret: enough to recognise it, never enough to use it. */
export const hintOf = (secret: string) => `${secret.slice(0, 8)}…${secret.slice(-4)}`
