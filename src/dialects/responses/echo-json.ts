/**
 * The JSON text of a Responses echo's large fields (`instructions`, `tools`, the output format's
 * schema, a long `user` …), made in slices before a stream's frames repeat them. A stream's `response.created`, `.in_progress`, and its last frame
 * (`.completed`, `.incomplete`, `.failed`) each carry the whole envelope, echo included: with
 * megabytes of instructions each frame was a `JSON.stringify` of megabytes in one turn of the
 * event loop (a 4 MB echo: turns of 35–50 ms; a stored response's replay, all frames at once:
 * 250–320 ms for 6.6 MB on a slow VM). Prepared here, a frame is the small rest of the envelope
 * serialized around a stand-in, and the prepared pieces put in its place: given as its pieces,
 * which the writers write one slice a turn (joined into one string, a rope, writing it flattened
 * and encoded megabytes in one turn: 20–25 ms for 8 MB).
 *
 * The splicing is `dialects/spliced-json.ts`'s.
 */
import { Effect } from "effect"
import { isLarge, jsonTextPiecesInSlices, LARGE_WIRE_UNITS } from "../../util/sliced-stringify.ts"
import { splicedPieces, standIn } from "../spliced-json.ts"
import type { ResponsesEcho } from "./decode.ts"

/**
 * The echo's fields that can be large, by the envelope key each is under: besides `instructions`
 * and `tools`, the output format's schema (`text`) and the free strings a client may send long.
 */
const FIELDS = {
  instructions: "instructions",
  tools: "tools",
  text: "text",
  user: "user",
  promptCacheKey: "prompt_cache_key",
  safetyIdentifier: "safety_identifier"
} as const satisfies Partial<Record<keyof ResponsesEcho, string>>
type Field = keyof typeof FIELDS
const FIELD_NAMES = Object.keys(FIELDS) as ReadonlyArray<Field>

const STAND_INS = Object.fromEntries(FIELD_NAMES.map((field) => [field, standIn(field)])) as Record<Field, string>

/** An echo's large fields' JSON text, in pieces; only for echoes `prepareEchoJson` found large. */
const prepared = new WeakMap<ResponsesEcho, Partial<Record<Field, ReadonlyArray<string>>>>()

/** Makes the JSON text of `echo`'s large fields in slices, for its frames (`echoFramePieces`). */
export const prepareEchoJson = Effect.fnUntraced(function*(echo: ResponsesEcho) {
  const json: Partial<Record<Field, ReadonlyArray<string>>> = {}
  let any = false
  for (const field of FIELD_NAMES) {
    const value = echo[field]
    if (value === null || !isLarge(value, LARGE_WIRE_UNITS)) continue
    json[field] = yield* jsonTextPiecesInSlices(value)
    any = true
  }
  if (any) prepared.set(echo, json)
})

/**
 * A frame holding `envelope` (made by `serialize`), with the echo's prepared fields put in: the
 * envelope is serialized with stand-ins, and the frame is given as the texts it is joined from —
 * the small text around each stand-in and the prepared pieces in its place — so that a writer can
 * write it a piece at a time without ever flattening it (`http/node-sse.ts`, `replay.ts`). Without
 * prepared fields, `serialize(envelope)` as it is: one string.
 */
export const echoFramePieces = <E extends object>(
  echo: ResponsesEcho,
  envelope: E,
  serialize: (envelope: E) => string
): string | ReadonlyArray<string> => {
  const json = prepared.get(echo)
  if (json === undefined) return serialize(envelope)
  const standIns: Record<string, unknown> = { ...(envelope as Record<string, unknown>) }
  for (const field of FIELD_NAMES) if (json[field] !== undefined) standIns[FIELDS[field]] = STAND_INS[field]
  return splicedPieces(serialize(standIns as E), FIELD_NAMES.flatMap((field) => {
    const pieces = json[field]
    return pieces === undefined ? [] : [{ key: FIELDS[field], standIn: STAND_INS[field], pieces }]
  }))
}
