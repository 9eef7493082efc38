/**
 * Ids remembered for a fixed time, each with a number: the in-process store's finished holds and
 * applied charges (`in-process.ts`). At 200 calls a second and 10 minutes of memory that is
 * ~240,000 ids per busy budget, and nearly every look-up is of a new id, which is not there.
 *
 * - Expiry: every id is remembered for the same time, so ids expire in the order they came. They
 *   and their expiry times are kept in two arrays in that order (the times unboxed); expiring pops
 *   from the front and never searches.
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

/** `expire` drops the popped front of its arrays once it is over this many ids and half of them. */
const COMPACT_AFTER = 1_024

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

export const makeRememberedIds = (bucketIds = BUCKET_IDS, movesPerAdd = MOVES_PER_ADD): RememberedIds => {
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

  const ids: Array<string> = []
  const expiries: Array<number> = []
  let head = 0

  return {
    get: (id) => {
      const index = indexOf(hashOf(id))
      const value = buckets[index]!.get(id)
      // Addressed to the map being split off, and not moved yet.
      return value === undefined && split !== undefined && index === split.toIndex ? split.from.get(id) : value
    },
    add: (id, value, expiresAt) => {
      buckets[indexOf(hashOf(id))]!.set(id, value)
      ids.push(id)
      expiries.push(expiresAt)
      if (split !== undefined) moveSome(split)
      else if (ids.length - head > buckets.length * bucketIds) startSplit()
    },
    expire: (now) => {
      while (head < ids.length && expiries[head]! <= now) {
        const id = ids[head]!
        const index = indexOf(hashOf(id))
        if (!buckets[index]!.delete(id) && split !== undefined && index === split.toIndex) split.from.delete(id)
        head++
      }
      if (head > COMPACT_AFTER && head * 2 > ids.length) {
        ids.splice(0, head)
        expiries.splice(0, head)
        head = 0
      }
    },
    get size() {
      return ids.length - head
    }
  }
}
