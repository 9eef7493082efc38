/**
 * The pieces a long parsed string was built from, kept beside it for a while, so that the passes
 * over it (`stringSlices`: escaping, encoding, checking, counting) can read it piece by piece.
 *
 * Why: the sliced parser builds a long string as V8 builds `a + b` — a rope over its pieces, no
 * copy. But the first read of a rope's characters (`slice`, `charCodeAt`, `Buffer.from`) flattens
 * all of it into one new string at once: for a 30 MiB text, 30 MB of fresh memory allocated and
 * written in one turn of the event loop, 18 ms on a middle VM and over 100 ms on the slowest
 * (nearly all of it page faults: filling a fresh 30 MB Buffer costs the same). With the pieces at
 * hand the rope is never read, so never flattened.
 *
 * A string has no identity a weak map could hold, so the strings are kept strongly, and bounded:
 * at most `KEPT_CHARS` characters, each for at most `KEPT_MS` (the length of a request that reads
 * it: parse, translate, answer, store), one per length (see `kept`). A string no longer kept is
 * read the plain way — flattened, correct, one turn longer. `===` on the same string is a pointer
 * comparison.
 */

/** Strings shorter than this are not kept: flattening one costs well under a millisecond. */
export const LONG_STRING_CHARS = 1024 * 1024

/** Characters kept at most, over all kept strings (the oldest go first). */
const KEPT_CHARS = 64 * 1024 * 1024

/** How long a string's pieces are kept after it was built. */
const KEPT_MS = 10_000

interface Kept {
  /** The string the pieces join to: the last one looked up with them (see `keptEntry`). */
  text: string
  readonly pieces: ReadonlyArray<string>
  /** Where each piece begins in `text`. */
  readonly starts: ReadonlyArray<number>
  readonly until: number
}

/**
 * By length, oldest first (a Map keeps insertion order). One string per length: `===` on two
 * distinct strings of one length compares their characters (flattening a rope first), so a lookup
 * must never meet more than one — many same-length strings (a tenant sending one text over and
 * over) would otherwise cost every lookup a compare of each. A newer string of a length replaces
 * the older, which is then read the plain way.
 */
const kept = new Map<number, Kept>()
let keptChars = 0
let expiry: ReturnType<typeof setTimeout> | undefined

const drop = (length: number) => {
  if (kept.delete(length)) keptChars -= length
}

const dropExpired = () => {
  const now = Date.now()
  for (const [length, entry] of kept) if (entry.until <= now) drop(length)
}

const scheduleExpiry = () => {
  const oldest = kept.values().next()
  if (expiry !== undefined || oldest.done === true) return
  expiry = setTimeout(() => {
    expiry = undefined
    dropExpired()
    scheduleExpiry()
  }, Math.max(0, oldest.value.until - Date.now()) + 10)
  // The registry never keeps a process alive.
  expiry.unref()
}

/** Keeps `pieces` (which join to `text`) beside `text`. */
export const rememberPieces = (text: string, pieces: ReadonlyArray<string>): void => {
  if (text.length < LONG_STRING_CHARS || text.length > KEPT_CHARS) return
  dropExpired()
  drop(text.length)
  const starts: Array<number> = []
  let at = 0
  for (const piece of pieces) {
    starts.push(at)
    at += piece.length
  }
  kept.set(text.length, { text, pieces, starts, until: Date.now() + KEPT_MS })
  keptChars += text.length
  while (keptChars > KEPT_CHARS) drop(kept.keys().next().value!)
  scheduleExpiry()
}

/**
 * The entry kept for `text`: at most one compare of characters, and only with a string of its
 * length. A string equal to the kept one but not the same (the same text sent again, or read back
 * from the store) is compared in full, both flattened first (87 ms for 6 MB on a slow VM); it then
 * takes the kept one's place, so the pass that looks it up again and again (a token bound, a
 * serializer) finds it by identity, without comparing 6 MB of characters at every step.
 */
const keptEntry = (text: string): Kept | undefined => {
  if (text.length < LONG_STRING_CHARS) return undefined
  const entry = kept.get(text.length)
  if (entry === undefined || entry.text !== text) return undefined
  entry.text = text
  return entry
}

/** The pieces `text` was built from, while they are kept. */
export const piecesOf = (text: string): ReadonlyArray<string> | undefined => keptEntry(text)?.pieces

/**
 * Whether `text` is empty or only whitespace (`text.trim() === ""`), read from its pieces when it
 * is kept: `trim` would flatten a long one first (18 ms for a 6 MB run input on a slow VM).
 */
export const isBlank = (text: string): boolean => {
  const pieces = piecesOf(text)
  return pieces === undefined ? text.trim() === "" : pieces.every((piece) => piece.trim() === "")
}

/** Whether `text` is kept in pieces (so `substringOf` reads them). */
export const isKept = (text: string): boolean => keptEntry(text) !== undefined

/**
 * `text.slice(start, end)`, made from the pieces when `text` is kept (a window of a long text read
 * by a pass that looks at neighbouring characters, without flattening the whole).
 */
export const substringOf = (text: string, start: number, end: number): string => {
  const entry = keptEntry(text)
  if (entry === undefined) return text.slice(start, end)
  const { pieces, starts } = entry
  // The last piece that begins at or before `start`.
  let lo = 0
  let hi = starts.length - 1
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1
    if (starts[mid]! <= start) lo = mid
    else hi = mid - 1
  }
  const parts: Array<string> = []
  for (let i = lo; i < pieces.length && starts[i]! < end; i++) {
    parts.push(pieces[i]!.slice(Math.max(0, start - starts[i]!), end - starts[i]!))
  }
  return parts.length === 1 ? parts[0]! : parts.join("")
}

/** Forgets every kept string (tests). */
export const forgetPieces = (): void => {
  kept.clear()
  keptChars = 0
}
