/**
 * A persistent FIFO for the queue machine: every version stays valid after a push or pop, and
 * used linearly (each version pushed at most once, as a step function does) push and pop cost
 * amortized O(1) — no copy per operation.
 *
 * Versions share one backing array and each sees its window [start, end). A push appends in place
 * when the version ends at the array's end (no other version has appended yet), else it copies its
 * window first: so a version branched from (the model tests step one state many ways) copies
 * once, and the others never see its items. A pop only moves `start`; the consumed prefix is
 * dropped by copying the window once it outweighs the live items (amortized O(1)).
 */
export interface Fifo<A> {
  readonly items: Array<A>
  readonly start: number
  readonly end: number
}

export const emptyFifo = <A>(): Fifo<A> => ({ items: [], start: 0, end: 0 })

export const fifoSize = <A>(fifo: Fifo<A>) => fifo.end - fifo.start

export const pushFifo = <A>(fifo: Fifo<A>, item: A): Fifo<A> => {
  if (fifo.end === fifo.items.length) {
    fifo.items.push(item)
    return { items: fifo.items, start: fifo.start, end: fifo.end + 1 }
  }
  const items = fifo.items.slice(fifo.start, fifo.end)
  items.push(item)
  return { items, start: 0, end: items.length }
}

/** The head and the rest; throws on an empty FIFO (callers check their counts first). */
export const popFifo = <A>(fifo: Fifo<A>): readonly [A, Fifo<A>] => {
  if (fifo.start >= fifo.end) throw new Error("popFifo: empty")
  const head = fifo.items[fifo.start]
  const start = fifo.start + 1
  if (start >= 32 && start * 2 >= fifo.end) return [head, { items: fifo.items.slice(start, fifo.end), start: 0, end: fifo.end - start }]
  return [head, { items: fifo.items, start, end: fifo.end }]
}

/** The items oldest first (a copy). */
export const fifoItems = <A>(fifo: Fifo<A>): Array<A> => fifo.items.slice(fifo.start, fifo.end)
