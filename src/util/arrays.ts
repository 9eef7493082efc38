/**
 * Empties an array that is filled again and again (a scratch list), keeping its backing store:
 * `length = 0` makes V8 drop it, so the next `push` allocates a new one (17 slots) — per streamed
 * token where a decoder reuses a list. `pop` keeps it.
 */
export const emptyKeepingCapacity = (array: Array<unknown>): void => {
  while (array.length > 0) array.pop()
}
