/**
 * Ids remembered for a fixed time, each with a number: the in-process store's finished holds and
 * applied charges (`in-process.ts`). At 200 calls a second and 10 minutes of memory that is
 * ~240,000 ids per busy budget, and nearly every look-up is of a new id, which is not there.
 *
 * Kept off the JavaScript heap, in typed arrays. Until 2026-12-02 they were strings in Maps: ~120
 * bytes an id on the heap (the id string, its Map entry, its place in the arrival queue), every id
 * promoted to the old generation, where it died ten minutes later — the heap's growth through a
 * soak's first ten minutes, and a full collection over ~240,000 strings (`bench/allowance-store.ts`).
 * Here an id is a 96-bit fingerprint (three 32-bit hashes with seeds drawn at start), its number and
 * its expiry: 28 bytes, plus 4–8 of index, that no collector looks into.
 *
 * - Fingerprints, not ids: two ids with one fingerprint would be taken for each other. Every id
 *   remembered here is minted by the gateway (`newId`: ~60 random bits; a run step's charge id is
 *   its node's minted id), never chosen by a client, so that is chance alone: with 240,000 ids
 *   remembered, ~3 × 10⁻²⁴ per look-up. An id a client could choose must not be remembered here
 *   as it is: a crafted pair could then collide on purpose.
 * - Expiry: every id is remembered for the same time, so ids expire in the order they came. They are
 *   kept in that order, in windows; expiring moves a cursor over the oldest window's expiries and
 *   drops the window once read. Nothing is deleted from an index.
 * - Look-up: each window has an open-addressing index (linear probing, at most half full) of its
 *   own. A window takes ids until it holds an eighth of all remembered (at least `windowIds`), so a
 *   look-up reads ~8–10 small indexes at a steady rate, and growing one (a copy and a rehash) moves
 *   at most an eighth of the ids: ~30,000 at 200 calls a second, well under a millisecond.
 */

/** Ids a window takes at least, before another is started. */
const WINDOW_IDS = 4_096

/** A window takes ids until it holds this share of all remembered (1 / WINDOW_SHARE). */
const WINDOW_SHARE = 8

/** Entries a new window has room for before it first grows. */
const FIRST_CAPACITY = 1_024

/** Ids in arrival order with their fingerprints, numbers and expiry times, and their index. */
interface Window {
  /** Ids it takes before the next window starts. */
  readonly limit: number
  count: number
  f0: Uint32Array
  f1: Uint32Array
  f2: Uint32Array
  values: Float64Array
  expiries: Float64Array
  /** Open addressing: entry index + 1 (0: empty); length a power of two, at least twice the capacity. */
  slots: Uint32Array
}

/** Sizes: the defaults above; tests make them small, so windows start and grow within a few ids. */
export interface RememberedIdsSizes {
  readonly windowIds?: number
  readonly firstCapacity?: number
}

export interface RememberedIds {
  /** The id's number, or `undefined` when it is not remembered (never was, or forgotten). */
  get(id: string): number | undefined
  /**
   * Remembers an id the caller knows is not remembered, until `expiresAt`, which is no earlier
   * than any id's before it (the memory is constant).
   */
  add(id: string, value: number, expiresAt: number): void
  /** Forgets every id whose time is up (`expiresAt <= now`). */
  expire(now: number): void
  /** How many ids are remembered. */
  readonly size: number
}

/** Seeds of the three hashes, drawn once per process. */
const SEEDS = crypto.getRandomValues(new Uint32Array(3))

/** The murmur3 finalizer: every input bit moves about half the output bits. */
const mix = (h: number) => {
  h = Math.imul(h ^ (h >>> 16), 0x85ebca6b)
  h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35)
  return (h ^ (h >>> 16)) >>> 0
}

/**
 * The fingerprint of the id being added or looked up (three lanes; module state: no allocation).
 * A settle looks an id up and then adds it: the last id's lanes are reused, not computed again.
 */
let h0 = 0
let h1 = 0
let h2 = 0
let lastId: string | undefined
const fingerprint = (id: string) => {
  if (id === lastId) return
  lastId = id
  let a = SEEDS[0]! ^ id.length
  let b = SEEDS[1]!
  let c = SEEDS[2]!
  for (let i = 0; i < id.length; i++) {
    const code = id.charCodeAt(i)
    a = Math.imul(a ^ code, 0x01000193)
    a = (a << 13) | (a >>> 19)
    b = Math.imul(b ^ code, 0x5bd1e995)
    b = (b << 15) | (b >>> 17)
    c = Math.imul(c + code, 0x27d4eb2d)
    c = (c << 11) | (c >>> 21)
  }
  h0 = mix(a)
  h1 = mix(b ^ h0)
  h2 = mix(c ^ h1)
}

/** Capacities are powers of two, so the index's mask reaches every slot. */
const powerOfTwoAtLeast = (n: number) => 2 ** Math.ceil(Math.log2(Math.max(1, n)))

const newWindow = (limit: number, capacity: number): Window => ({
  limit,
  count: 0,
  f0: new Uint32Array(capacity),
  f1: new Uint32Array(capacity),
  f2: new Uint32Array(capacity),
  values: new Float64Array(capacity),
  expiries: new Float64Array(capacity),
  slots: new Uint32Array(capacity * 2)
})

/** Indexes entry `index` (its first lane already written) in `slots`. */
const insert = (slots: Uint32Array, f0: number, index: number) => {
  const mask = slots.length - 1
  let slot = f0 & mask
  while (slots[slot] !== 0) slot = (slot + 1) & mask
  slots[slot] = index + 1
}

/** Doubles a full window's room, and rebuilds its index at the new size. */
const grow = (w: Window) => {
  const capacity = w.f0.length * 2
  const wider = <T extends Uint32Array | Float64Array>(from: T, make: (n: number) => T): T => {
    const to = make(capacity)
    to.set(from)
    return to
  }
  w.f0 = wider(w.f0, (n) => new Uint32Array(n))
  w.f1 = wider(w.f1, (n) => new Uint32Array(n))
  w.f2 = wider(w.f2, (n) => new Uint32Array(n))
  w.values = wider(w.values, (n) => new Float64Array(n))
  w.expiries = wider(w.expiries, (n) => new Float64Array(n))
  w.slots = new Uint32Array(capacity * 2)
  for (let i = 0; i < w.count; i++) insert(w.slots, w.f0[i]!, i)
}

/**
 * The live entry with the current fingerprint in `w` (entries before `from` are forgotten), or -1.
 * An id forgotten and added again may be in a window twice: the probe goes on past a forgotten one.
 */
const find = (w: Window, from: number) => {
  const { slots, f0, f1, f2 } = w
  const mask = slots.length - 1
  for (let slot = h0 & mask; ; slot = (slot + 1) & mask) {
    const entry = slots[slot]!
    if (entry === 0) return -1
    const i = entry - 1
    if (i >= from && f0[i] === h0 && f1[i] === h1 && f2[i] === h2) return i
  }
}

export const makeRememberedIds = ({ windowIds = WINDOW_IDS, firstCapacity = FIRST_CAPACITY }: RememberedIdsSizes = {}): RememberedIds => {
  // Oldest first; ids before `head` in the first are forgotten.
  const windows: Array<Window> = []
  let head = 0
  let size = 0

  return {
    get: (id) => {
      if (windows.length === 0) return undefined
      fingerprint(id)
      for (let w = windows.length - 1; w >= 0; w--) {
        const window = windows[w]!
        const i = find(window, w === 0 ? head : 0)
        if (i >= 0) return window.values[i]
      }
      return undefined
    },
    add: (id, value, expiresAt) => {
      let last = windows[windows.length - 1]
      if (last === undefined || last.count >= last.limit) {
        const limit = Math.max(windowIds, Math.ceil(size / WINDOW_SHARE))
        windows.push(last = newWindow(limit, powerOfTwoAtLeast(Math.min(firstCapacity, limit))))
      }
      if (last.count === last.f0.length) grow(last)
      fingerprint(id)
      const i = last.count++
      last.f0[i] = h0
      last.f1[i] = h1
      last.f2[i] = h2
      last.values[i] = value
      last.expiries[i] = expiresAt
      insert(last.slots, h0, i)
      size++
    },
    expire: (now) => {
      const last = windows[windows.length - 1]
      if (last === undefined) return
      // Everything expired (a budget quiet for the whole memory after a burst): start afresh.
      if (last.expiries[last.count - 1]! <= now) {
        windows.length = 0
        head = 0
        size = 0
        return
      }
      // The last window holds an id not yet expired, so the loop ends in it at the latest.
      for (let first = windows[0]!; ; first = windows[0]!) {
        const { expiries, count } = first
        while (head < count && expiries[head]! <= now) {
          head++
          size--
        }
        if (head < count) return
        windows.shift()
        head = 0
      }
    },
    get size() {
      return size
    }
  }
}
