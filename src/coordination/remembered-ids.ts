/**
 * Ids remembered for a fixed time, each with a number: the in-process store's finished holds and
 * applied charges (`in-process.ts`). At 200 calls a second and 10 minutes of memory that is
 * ~240,000 ids per busy budget, and nearly every look-up is of a new id, which is not there.
 *
 * - Expiry: every id is remembered for the same time, so ids expire in the order they came. They
 *   and their expiry times are kept in that order, in chunks of 4,096; expiring reads from the
 *   front, never searches, and drops each chunk once read.
 * - Look-up: the ids are spread by a hash over maps of ~16,384 ids each, by linear hashing: each
 *   time the average passes that, one more map is split off an existing one, so a look-up reads
 *   one map (two while a split is under way). A split moves its ids a few dozen per `add`, never
 *   all at once (moving 8,000 ids takes milliseconds). One map of them all would stall the event
 *   loop for tens of ms each time V8 rebuilds its table (every few hundred thousand inserts once ids
 *   expire as fast as they come); maps in arrival order (the design before this) made every miss
 *   read each of them: 8–17 µs per reserve and settle at 200–400 calls a second
 *   (`bench/allowance-store.ts`), growing with the rate. Maps this large have their tables in V8's
 *   large-object space, where young-generation collections do not copy them.
 * Maps are never merged back: a budget that was busy keeps its (then mostly empty) maps until the
 * budget itself is forgotten.
 */

/** Ids per map, on average, before one more is split off. */
const BUCKET_IDS = 16_384

/** Ids of a map under way of being split that each `add` looks at (and moves, if theirs to move). */
const MOVES_PER_ADD = 32

/**
 * Ids per chunk of the arrival-ordered queue: `expire` drops a whole chunk once it is read, so no
 * array of hundreds of thousands is ever spliced (one such splice held the event loop for 4–6 ms).
 */
const CHUNK_IDS = 4_096

/** A run of ids in arrival order, with their expiry times (an array of numbers only: unboxed). */
interface Chunk {
  readonly ids: Array<string>
  readonly expiries: Array<number>
}

/**
 * A hash of the id's last 12 characters: ids end in random characters (`newId`: 10 random after
 * the time; a run step's charge id ends in its node id and a retry number).
 */
const hashOf = (id: string) => {
  let h = 0
  for (let i = Math.max(0, id.length - 12); i < id.length; i++) h = (Math.imul(h, 31) + id.charCodeAt(i)) | 0
  return h >>> 0
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

/** A split under way: the ids of `from` that address `to` now are moved a few at a time. */
interface Split {
  readonly from: Map<string, number>
  readonly fromIndex: number
  readonly to: Map<string, number>
  readonly toIndex: number
  /** The hash bits that tell the two apart. */
  readonly mask: number
  readonly pending: Iterator<[string, number]>
}

/** Sizes: the defaults above; tests make them small, so splits and chunks turn over within a few ids. */
export interface RememberedIdsSizes {
  readonly bucketIds?: number
  readonly movesPerAdd?: number
  readonly chunkIds?: number
}

export const makeRememberedIds = (
  { bucketIds = BUCKET_IDS, chunkIds = CHUNK_IDS, movesPerAdd = MOVES_PER_ADD }: RememberedIdsSizes = {}
): RememberedIds => {
  const buckets: Array<Map<string, number>> = [new Map()]
  // Linear hashing: `round` maps at the start of a round (a power of two); maps below `next` are
  // split already, and their ids are addressed by one more bit of the hash.
  let round = 1
  let next = 0
  let split: Split | undefined
  const indexOf = (hash: number) => {
    const low = hash & (round - 1)
    return low < next ? hash & (2 * round - 1) : low
  }

  /** Starts splitting map `next`: from now on its ids with the new bit set address the new map. */
  const startSplit = () => {
    const from = buckets[next]!
    const to = new Map<string, number>()
    split = { from, fromIndex: next, to, toIndex: buckets.length, mask: 2 * round - 1, pending: from.entries() }
    buckets.push(to)
    if (++next === round) {
      round *= 2
      next = 0
    }
  }
  /** Moves on the split under way by up to `movesPerAdd` ids of its old map. */
  const moveSome = (current: Split) => {
    for (let looked = 0; looked < movesPerAdd; looked++) {
      const entry = current.pending.next()
      if (entry.done === true) {
        split = undefined
        return
      }
      const [id, value] = entry.value
      if ((hashOf(id) & current.mask) !== current.fromIndex) {
        current.to.set(id, value)
        current.from.delete(id)
      }
    }
  }

  // The ids in arrival order: chunks, the first read from `head`, the last filled up to its length.
  const chunks: Array<Chunk> = []
  let head = 0
  let size = 0

  return {
    get: (id) => {
      const index = indexOf(hashOf(id))
      const value = buckets[index]!.get(id)
      // Addressed to the map being split off, and not moved yet.
      return value === undefined && split !== undefined && index === split.toIndex ? split.from.get(id) : value
    },
    add: (id, value, expiresAt) => {
      buckets[indexOf(hashOf(id))]!.set(id, value)
      let last = chunks[chunks.length - 1]
      if (last === undefined || last.ids.length === chunkIds) chunks.push(last = { ids: [], expiries: [] })
      last.ids.push(id)
      last.expiries.push(expiresAt)
      size++
      if (split !== undefined) moveSome(split)
      else if (size > buckets.length * bucketIds) startSplit()
    },
    expire: (now) => {
      // Everything expired (a budget quiet for the whole memory after a burst): start afresh at
      // once rather than deleting hundreds of thousands of ids one by one (65 ms for 240,000).
      const last = chunks[chunks.length - 1]
      if (last !== undefined && last.expiries[last.expiries.length - 1]! <= now) {
        buckets.length = 1
        buckets[0] = new Map()
        round = 1
        next = 0
        split = undefined
        chunks.length = 0
        head = 0
        size = 0
        return
      }
      for (let first = chunks[0]; first !== undefined; first = chunks[0]) {
        while (head < first.ids.length && first.expiries[head]! <= now) {
          const id = first.ids[head]!
          first.ids[head] = "" // not kept alive by its chunk until the chunk goes
          const index = indexOf(hashOf(id))
          if (!buckets[index]!.delete(id) && split !== undefined && index === split.toIndex) split.from.delete(id)
          head++
          size--
        }
        // A chunk read to its end goes (a partly filled last one too: the next add starts another).
        if (head < first.ids.length) return
        chunks.shift()
        head = 0
      }
    },
    get size() {
      return size
    }
  }
}
