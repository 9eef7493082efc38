/**
 * Empties an array that is filled again and again (a scratch list), keeping its backing store:
 * `length = 0` makes V8 drop it, so the next `push` allocates a new one (17 slots) — per streamed
 * token where a decoder reuses a list. `pop` keeps it.
 */
export const emptyKeepingCapacity = (array: Array<unknown>): void => {
  while (array.length > 0) array.pop()
}

/**
 * `array` with `value` at `index`, for a list that stays short but lives as long as a stream (its
 * blocks, its output items). V8 gives an array grown by `push` or by assignment 16 spare slots
 * (~130 bytes an open stream would hold), so while short the list is replaced by an exact copy
 * (`concat` allocates exactly); past 16 items it grows in place.
 */
export const withItemAt = <T>(array: Array<T>, index: number, value: T): Array<T> => {
  if (index === array.length && index < 16) return array.concat([value])
  array[index] = value
  return array
}
