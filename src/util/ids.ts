/**
 * Identifiers: a prefix, the time of minting and random base62 characters (`run_…`, `call_…`),
 * drawn from a pool of CSPRNG bytes. Secrets (API keys, admin tokens) use the same alphabet but
 * are random throughout: src/keys/secrets.ts.
 *
 * Why the time: ids are primary keys, and a B-tree takes ids that arrive in order at its right
 * edge, in the pages it just wrote, where random ids land on a different leaf each, all over an
 * index larger than the buffer cache, every first touch after a checkpoint a whole page in the WAL.
 * The usage ledger gets one row per request: a 1,000-row flush into a 1M-row embedded ledger took
 * 45 ms with random ids and 23 with these (the README's Architecture section has the runs).
 * OpenAI's response ids lead with a timestamp too; the time an id was minted is not a secret (the
 * objects carry `created`).
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
export const randomBase62 = (bytes: number): string => randomBase62Chars(Math.ceil((bytes * 8) / Math.log2(62)))

/** `count` random base62 characters (ids whose shape is fixed by an API: `msg_` + 24). */
export const randomBase62Chars = (count: number): string => {
  length = 0
  appendBase62(count)
  return take()
}

/** Characters of the minting time in an id: 62^7 ms reach the year 2081. */
const TIME_CHARS = 7

/** `Date.now()` in `TIME_CHARS` base62 characters, most significant first (fixed width, so ids sort by time). */
const appendTime = () => {
  const now = Date.now()
  for (let place = 62 ** (TIME_CHARS - 1); place >= 1; place /= 62) put(BASE62_CODES[Math.floor(now / place) % 62]!)
}

/**
 * `chars` base62 characters: the first 7 the time of minting (ids minted later sort after, to the
 * millisecond), the rest random (10 random characters carry ~59 bits).
 */
export const timeOrderedBase62 = (chars: number): string => {
  length = 0
  appendTime()
  appendBase62(chars - TIME_CHARS)
  return take()
}

/** A new id: `prefix_` and 17 base62 characters, the time of minting then 10 random ones. */
export const newId = (prefix: string) => {
  length = 0
  for (let i = 0; i < prefix.length; i++) put(prefix.charCodeAt(i))
  put(95) // "_"
  appendTime()
  appendBase62(17 - TIME_CHARS)
  return take()
}
