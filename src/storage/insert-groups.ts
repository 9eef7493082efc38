/**
 * Rows cut into insert statements of a size the SQL client can encode without holding the event
 * loop: it encodes a statement's parameters in one turn (250 batch requests of 128 KiB were 32 MB
 * at once; a stored response's 1,800 items of 4 KiB, 7 MB: ~150 ms in one turn on a slow VM,
 * under the turn probe). Each statement then waits for the database, so the loop turns between
 * them.
 */

/** Characters of text parameters a statement takes before it is cut (the first row always goes). */
const INSERT_GROUP_CHARS = 1024 * 1024
/** Rows a statement takes at most. */
const INSERT_GROUP_ROWS = 250

/** `[from, to)` ranges of `rows`, one per statement; `chars` is a row's size in text parameters. */
export function* insertGroups<A>(rows: ReadonlyArray<A>, chars: (row: A) => number): Generator<readonly [number, number]> {
  for (let at = 0; at < rows.length;) {
    let end = at
    let total = 0
    while (end < rows.length && end - at < INSERT_GROUP_ROWS && (end === at || total < INSERT_GROUP_CHARS)) total += chars(rows[end++]!)
    yield [at, end]
    at = end
  }
}
