/**
 * Bytes cut into the chunks a table keeps (a file's content, a state's JSON text): every chunk but
 * the last exactly `size` bytes, so no row nears what the SQL client reads at once and a read can
 * take one chunk per statement — the client decodes a statement's whole result in one turn of the
 * event loop.
 */

/**
 * `content`, whole or in the pieces it arrived in, in chunks of `size` bytes, each made when it is
 * reached: a view of one piece where a whole chunk lies in it, else a copy of its pieces. Joining
 * a 30 MiB upload into one buffer first held the event loop ~100 ms on a slow VM; a chunk is
 * made between two statements.
 */
export function* chunksOf(content: Uint8Array | ReadonlyArray<Uint8Array>, size: number): Generator<Uint8Array> {
  const pieces = content instanceof Uint8Array ? [content] : content
  let chunk = new Uint8Array(0)
  let filled = 0
  for (const piece of pieces) {
    for (let at = 0; at < piece.byteLength;) {
      if (filled === 0 && piece.byteLength - at >= size) {
        yield piece.subarray(at, at + size)
        at += size
        continue
      }
      if (chunk.byteLength === 0) chunk = new Uint8Array(size)
      const take = Math.min(size - filled, piece.byteLength - at)
      chunk.set(piece.subarray(at, at + take), filled)
      filled += take
      at += take
      if (filled === size) {
        yield chunk
        chunk = new Uint8Array(0)
        filled = 0
      }
    }
  }
  if (filled > 0) yield chunk.subarray(0, filled)
}

/** The total length of `content`'s pieces. */
export const byteLengthOf = (content: Uint8Array | ReadonlyArray<Uint8Array>) =>
  content instanceof Uint8Array ? content.byteLength : content.reduce((sum, piece) => sum + piece.byteLength, 0)
