/**
 * Work on the event loop in slices: a long pass over a request or a stored document (a parse, a
 * serialization, a check) gives the loop back every `SLICE_MS`, so no other client waits longer
 * than that for it. The one rule for how long a slice runs, and where a pass over a list pauses;
 * its users: the sliced JSON parser, the sliced serializer, the storable check, the staged
 * decoders, every pass over a request's messages (requirements, token bound, upstream
 * translations) and the artifact row writer.
 */
import { Effect } from "effect"
import { piecesOf } from "./long-strings.ts"

/** Work between two yields to the event loop. */
export const SLICE_MS = 2

/**
 * A pass that may pause: a generator that `yield`s (nothing) between pieces of work on a long list
 * and returns its result. The pass is the same code however it is run; only its driver decides
 * whether a pause gives the event loop a turn (`runInSlices`) or not (`runAtOnce`).
 */
export type Sliced<A> = Generator<void, A, void>

/** Items of a list between two of a pass's pauses (a few tens of microseconds of work or more). */
const PAUSE_EVERY = 128

/** Whether a pass at item `index` of a long list offers a pause. */
export const pausesAt = (index: number): boolean => index % PAUSE_EVERY === PAUSE_EVERY - 1

/** `list.map(f)`, offering a pause every PAUSE_EVERY items. */
export function* slicedMap<A, B>(list: ReadonlyArray<A>, f: (item: A, index: number) => B): Sliced<Array<B>> {
  const out: Array<B> = []
  for (let i = 0; i < list.length; i++) {
    out.push(f(list[i], i))
    if (pausesAt(i)) yield
  }
  return out
}

const nothingExpected = (_: unknown): _ is never => false

/**
 * Runs `steps` to its end and gives back what it returns, yielding to the event loop whenever
 * a slice has run `SLICE_MS` (the clock is read at each step, so a step should be a few tens of
 * microseconds of work or more). The first slice runs in the caller's turn. What the steps throw
 * fails the Effect when `isExpected` says so (a refusal), and is a defect otherwise. `sliceMs`:
 * how long a slice runs (`Infinity`: to the end, the pauses ignored).
 */
export const runInSlices = <A, E = never>(
  steps: Iterator<unknown, A>,
  isExpected: (error: unknown) => error is E = nothingExpected,
  sliceMs: number = SLICE_MS
): Effect.Effect<A, E> =>
  Effect.suspend(() => {
    let started = performance.now()
    const slice = (): Effect.Effect<A, E> => {
      try {
        for (;;) {
          const step = steps.next()
          if (step.done === true) return Effect.succeed(step.value)
          if (performance.now() - started >= sliceMs) {
            return Effect.andThen(Effect.yieldNow, Effect.suspend(() => {
              started = performance.now()
              return slice()
            }))
          }
        }
      } catch (error) {
        if (isExpected(error)) return Effect.fail(error)
        throw error
      }
    }
    return slice()
  })

/** Runs `steps` to its end at once (a small input, or a caller that cannot pause). */
export const runAtOnce = <A>(steps: Iterator<unknown, A>): A => {
  for (;;) {
    const step = steps.next()
    if (step.done === true) return step.value
  }
}

/** Characters of a long string handled at once (escaped, checked, measured). */
export const STRING_SLICE = 64 * 1024

/** The first half of a surrogate pair: a string cut after it would leave a lone surrogate. */
export const isHighSurrogate = (code: number) => code >= 0xd800 && code <= 0xdbff

/**
 * A long string in slices of at most `size` (`STRING_SLICE`) characters, never cut inside a surrogate
 * pair (each half alone would be a lone surrogate: escaped by JSON.stringify, refused by the
 * store), so what is computed slice by slice adds up to what the whole string gives.
 */
export function* stringSlices(s: string, size: number = STRING_SLICE): Generator<string> {
  const pieces = s.length > size ? piecesOf(s) : undefined
  if (pieces === undefined) yield* flatSlices(s, size)
  else yield* gatheredSlices(pieces, size)
}

/** A string's slices, read from the string itself (which flattens a rope first, at once). */
function* flatSlices(s: string, size: number): Generator<string> {
  for (let at = 0; at < s.length;) {
    let end = Math.min(s.length, at + size)
    if (end < s.length && isHighSurrogate(s.charCodeAt(end - 1))) end--
    yield s.slice(at, end)
    at = end
  }
}

/**
 * A text given as pieces, in slices: pieces gathered up to `size` characters, a longer one cut
 * (a long parsed string's pieces, `util/long-strings.ts`; a JSON text's, `model/tokenizer.ts`). A
 * slice ends in a high surrogate only where a piece does (a parsed string's never do).
 */
export function* gatheredSlices(pieces: ReadonlyArray<string>, size: number): Generator<string> {
  let gathered: Array<string> = []
  let chars = 0
  for (const piece of pieces) {
    if (chars > 0 && chars + piece.length > size) {
      yield gathered.length === 1 ? gathered[0]! : gathered.join("")
      gathered = []
      chars = 0
    }
    if (piece.length > size) yield* flatSlices(piece, size)
    else {
      gathered.push(piece)
      chars += piece.length
    }
  }
  if (chars > 0) yield gathered.length === 1 ? gathered[0]! : gathered.join("")
}
