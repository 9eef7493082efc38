/**
 * The JSON text of a value made without holding the event loop: `JSON.stringify` of a large value
 * runs at once, ~10 ms per MiB of string on a slow 2-core VM (a 16 MiB string: 170–300 ms), during
 * which no other client is served.
 *
 * - A small value (under `LARGE_WIRE_UNITS` characters of strings, found by a walk that stops
 *   there) is `JSON.stringify`d at once: the common case pays only that short walk.
 * - A large one is serialized piece by piece — long strings escaped in slices of `STRING_SLICE`
 *   characters — yielding to the event loop every `SLICE_MS`. The text is exactly
 *   `JSON.stringify`'s.
 *
 * Its users: upstream request bodies (`backends/upstream/upstream-body.ts`); stored documents (a
 * batch's request bodies, a run's documents and events, a state, a stored response's
 * conversation); JSON responses (`http/json.ts`) and a run's SSE event frames; and the token
 * counts of large schemas and tool-call inputs (`model/tokens.ts`).
 */
import { Effect } from "effect"
import { runInSlices, SLICE_MS, STRING_SLICE, stringSlices } from "./slices.ts"

/** Above this many characters (strings plus a few per value) a value is serialized in slices. */
export const LARGE_WIRE_UNITS = 256 * 1024
/** Characters gathered before they are encoded into one chunk. */
const CHUNK_UNITS = 64 * 1024
/**
 * Work between two readings of the clock, in characters: about one `STRING_SLICE` of a long
 * string, or a few hundred small pieces (each counted as `SMALL_PIECE_UNITS` at least).
 */
const UNITS_PER_CHECK = STRING_SLICE
const SMALL_PIECE_UNITS = 256

/** A value serialized in slices: its UTF-8 chunks and their total length. */
export interface ChunkedBody {
  readonly chunks: ReadonlyArray<Uint8Array>
  readonly bytes: number
}

/** Whether `value` is over `limit` characters (LARGE_WIRE_UNITS by default); stops as soon as it is. */
export const isLarge = (value: unknown, limit: number = LARGE_WIRE_UNITS): boolean => {
  const stack: Array<unknown> = [value]
  let units = 0
  while (stack.length > 0) {
    const current = stack.pop()
    if (typeof current === "string") units += current.length
    else if (typeof current === "object" && current !== null) {
      if (Array.isArray(current)) for (let i = 0; i < current.length; i++) stack.push(current[i])
      else for (const key in current) stack.push((current as Record<string, unknown>)[key])
    }
    units += 4
    if (units > limit) return true
  }
  return false
}

/**
 * A character `JSON.stringify` writes otherwise than itself: a quote, a backslash, a control
 * character or a surrogate (a lone one is escaped; a slice with none is its own JSON text, and
 * copying 30 MiB of text through `JSON.stringify` for nothing doubled what a long answer allocates).
 */
const ESCAPED = /["\\\u0000-\u001f\ud800-\udfff]/

/** What JSON.stringify leaves out of an object and writes as `null` in an array. */
const omitted = (value: unknown) => value === undefined || typeof value === "function" || typeof value === "symbol"

/**
 * The JSON text of `value` in pieces, as JSON.stringify writes it (long strings in slices); with
 * `sortKeys`, every object's keys in sorted order (a canonical text).
 */
function* pieces(value: unknown, sortKeys: boolean): Generator<string> {
  if (typeof value === "string") {
    if (value.length <= STRING_SLICE) {
      yield JSON.stringify(value)
      return
    }
    yield "\""
    for (const slice of stringSlices(value)) yield ESCAPED.test(slice) ? JSON.stringify(slice).slice(1, -1) : slice
    yield "\""
    return
  }
  if (typeof value !== "object" || value === null || typeof (value as { toJSON?: unknown }).toJSON === "function") {
    yield JSON.stringify(value) ?? "null"
    return
  }
  if (Array.isArray(value)) {
    yield "["
    for (let i = 0; i < value.length; i++) {
      if (i > 0) yield ","
      if (omitted(value[i])) yield "null"
      else yield* pieces(value[i], sortKeys)
    }
    yield "]"
    return
  }
  yield "{"
  let first = true
  const keys = Object.keys(value)
  if (sortKeys) keys.sort()
  for (const key of keys) {
    const field = (value as Record<string, unknown>)[key]
    if (omitted(field)) continue
    yield `${first ? "" : ","}${JSON.stringify(key)}:`
    first = false
    yield* pieces(field, sortKeys)
  }
  yield "}"
}

/**
 * Feeds `take` the JSON text of `value` piece by piece, yielding to the event loop every
 * `SLICE_MS` (`runInSlices`). Begins with a yield: the caller's own work on the value (a
 * translation, the walk in `isLarge`) ran in this turn.
 */
const inSlices = (value: unknown, take: (piece: string) => void, sortKeys = false): Effect.Effect<void> =>
  Effect.andThen(Effect.yieldNow, Effect.suspend(() => runInSlices(fed(value, take, sortKeys))))

/**
 * Hands the pieces to `take`, pausing once their work adds up to `UNITS_PER_CHECK` (where
 * `runInSlices` reads the clock): after every slice of a long string, or every few hundred small
 * pieces. Counted by pieces alone (every 256), a long string's slices — each one 64 Ki characters
 * escaped and encoded — went by between two readings: a 15.5 Mi-character tool description was
 * serialized in one turn, 140–390 ms on a slow VM.
 */
function* fed(value: unknown, take: (piece: string) => void, sortKeys: boolean): Generator<void> {
  let sinceCheck = 0
  for (const piece of pieces(value, sortKeys)) {
    take(piece)
    sinceCheck += Math.max(SMALL_PIECE_UNITS, piece.length)
    if (sinceCheck >= UNITS_PER_CHECK) {
      sinceCheck = 0
      yield
    }
  }
}

/**
 * Feeds `take` the canonical JSON text of `value` (`JSON.stringify`'s with every object's keys
 * sorted) piece by piece, in slices: what a request's hash is made of, so that the same body
 * hashes the same whatever its key order, without its whole text ever being made.
 */
export const canonicalJsonInSlices = (value: unknown, take: (piece: string) => void): Effect.Effect<void> => inSlices(value, take, true)

/** Gathers pieces into `CHUNK_UNITS`-character groups, each handed to `flush` as one string. */
const grouped = (flush: (text: string) => void) => {
  let pending: Array<string> = []
  let units = 0
  return {
    take: (piece: string) => {
      pending.push(piece)
      units += piece.length
      if (units >= CHUNK_UNITS) {
        flush(pending.join(""))
        pending = []
        units = 0
      }
    },
    end: () => {
      if (units > 0) flush(pending.join(""))
      pending = []
      units = 0
    }
  }
}

/** The UTF-8 chunks of a value's JSON text: of a large one made in slices, of a small one (one chunk) at once. */
export const jsonChunksInSlices = (value: unknown): Effect.Effect<ChunkedBody> =>
  Effect.suspend(() => {
    if (!isLarge(value)) {
      const chunk = Buffer.from(JSON.stringify(value) ?? "null")
      return Effect.succeed({ chunks: [chunk], bytes: chunk.byteLength })
    }
    const chunks: Array<Uint8Array> = []
    let bytes = 0
    const groups = grouped((text) => {
      const chunk = Buffer.from(text)
      chunks.push(chunk)
      bytes += chunk.length
    })
    return inSlices(value, groups.take).pipe(Effect.map((): ChunkedBody => {
      groups.end()
      return { chunks, bytes }
    }))
  })

/**
 * `JSON.stringify(value)`'s text in pieces of about `CHUNK_UNITS` characters, made in slices when
 * large (one piece when small): for a writer that takes text piece by piece (an SSE frame), so
 * the whole is never joined or encoded at once.
 */
export const jsonTextPiecesInSlices = (value: unknown): Effect.Effect<ReadonlyArray<string>> =>
  Effect.suspend((): Effect.Effect<ReadonlyArray<string>> => {
    if (!isLarge(value)) return Effect.succeed([JSON.stringify(value)])
    const texts: Array<string> = []
    const groups = grouped((text) => texts.push(text))
    return inSlices(value, groups.take).pipe(
      Effect.andThen(Effect.yieldNow),
      Effect.map(() => {
        groups.end()
        return texts
      })
    )
  })

/**
 * `JSON.stringify(value)`, the same text, made in slices when large (what is stored: a batch's
 * request bodies, a run's documents and events): only the last join of the pieces runs
 * at once, a copy of the text.
 */
export const jsonTextInSlices = (value: unknown): Effect.Effect<string> =>
  Effect.map(jsonTextPiecesInSlices(value), (pieces) => pieces.length === 1 ? pieces[0]! : pieces.join(""))

/**
 * The JSON text of each of `values` (a stored response's items: thousands of small ones), a small
 * one at once with a yield to the event loop every `SLICE_MS`, a large one in slices.
 */
export const jsonTextsInSlices = Effect.fnUntraced(function*(values: ReadonlyArray<unknown>): Effect.fn.Return<ReadonlyArray<string>> {
  const texts: Array<string> = []
  let started = performance.now()
  for (const value of values) {
    if (isLarge(value)) texts.push(yield* jsonTextInSlices(value))
    else texts.push(JSON.stringify(value) ?? "null")
    if (performance.now() - started >= SLICE_MS) {
      yield* Effect.yieldNow
      started = performance.now()
    }
  }
  return texts
})

/** The UTF-8 size of `value`'s JSON text: of a large one counted in slices, without the text ever being made whole. */
export const jsonBytesInSlices = (value: unknown): Effect.Effect<number> =>
  Effect.suspend(() => {
    if (!isLarge(value)) return Effect.succeed(Buffer.byteLength(JSON.stringify(value) ?? "null"))
    let bytes = 0
    return Effect.map(inSlices(value, (piece) => void (bytes += Buffer.byteLength(piece))), () => bytes)
  })
