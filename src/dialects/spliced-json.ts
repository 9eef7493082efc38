/**
 * A frame whose JSON holds a value of megabytes (a Responses echo's `instructions`, a legacy
 * completion's echoed prompt), made without serializing that value in one turn of the event loop:
 * the value's JSON text is made ahead, in slices (`jsonTextPiecesInSlices`), the frame is
 * serialized with a short stand-in string in the value's place, and the frame is given as the
 * texts it is joined from — the small text around each stand-in and the prepared pieces in its
 * place. A writer writes them a slice a turn (`http/node-sse.ts`) and never flattens the whole.
 *
 * A stand-in is a string no request can contain by chance: random per process, between NULs.
 */
import { randomBytes } from "node:crypto"

const token = randomBytes(12).toString("hex")

/** The stand-in for the value named `name`, to serialize in its place. */
export const standIn = (name: string): string => `\u0000${token}-${name}\u0000`

/** A value put into a serialized frame: the key it is under, its stand-in, and its JSON text in pieces. */
export interface SplicedValue {
  readonly key: string
  readonly standIn: string
  readonly pieces: ReadonlyArray<string>
}

/**
 * `text` (serialized with stand-ins) with each value's pieces in its stand-in's place, as the
 * texts it is joined from; `text` itself when no stand-in is in it. Each stand-in is looked for
 * once, as `"key":"<stand-in>"` (an object's own key, in the frame's small text).
 */
export const splicedPieces = (text: string, values: ReadonlyArray<SplicedValue>): string | ReadonlyArray<string> => {
  const places = values.flatMap((value) => {
    const mark = `${JSON.stringify(value.key)}:${JSON.stringify(value.standIn)}`
    const at = text.indexOf(mark)
    return at < 0 ? [] : [{ at, end: at + mark.length, key: `${JSON.stringify(value.key)}:`, pieces: value.pieces }]
  }).sort((a, b) => a.at - b.at)
  if (places.length === 0) return text
  const out: Array<string> = []
  let from = 0
  for (const place of places) {
    out.push(text.slice(from, place.at) + place.key)
    for (const piece of place.pieces) out.push(piece)
    from = place.end
  }
  out.push(text.slice(from))
  return out
}

/** The texts joined as a rope (`+` links two strings without copying either): for a caller that wants one string. */
export const ropeOf = (pieces: ReadonlyArray<string>): string => {
  let text = ""
  for (const piece of pieces) text += piece
  return text
}
