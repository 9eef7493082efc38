/**
 * Replaying a stored response as its event stream (`GET /v1/responses/{id}?stream=true`).
 *
 * A stored response keeps the canonical events it was encoded from and the echo of its request;
 * feeding them to the same stream encoder again gives the same frames — the same events, deltas
 * and sequence numbers a live stream of it had, ending with `response.completed` (or
 * `response.incomplete`) whose `response` is the stored envelope. `starting_after` drops every
 * event up to and including that sequence number, as OpenAI's resumption does.
 */
import { Effect } from "effect"
import type { CanonicalEvent } from "../../model/events.ts"
import { makeRequest } from "../../model/request.ts"
import { stringSlices } from "../../util/slices.ts"
import type { ResponsesEcho } from "./decode.ts"
import { prepareEchoJson } from "./echo-json.ts"
import { ResponsesStreamEncoder } from "./stream.ts"

/** What is stored beside a response so its stream can be replayed. */
export interface ReplayRecord {
  readonly createdAt: number
  readonly echo: ResponsesEcho
  readonly events: ReadonlyArray<CanonicalEvent>
}

/** Events encoded between two yields to the event loop (a delta's frame is small; an envelope may be megabytes). */
const EVENTS_PER_TURN = 64
/** Characters of frames encoded before a yield: a frame holding an echo of megabytes takes a turn of its own. */
const CHARS_PER_TURN = 256 * 1024

/** Characters of small frames gathered into one write. */
const CHUNK_CHARS = 64 * 1024

const utf8 = new TextEncoder()

/**
 * The SSE frames of the stored response as bytes, after `startingAfter` when given, made a few at
 * a time with a yield between: made at once and joined, the frames of a response whose echo holds
 * megabytes (its instructions, repeated in `response.created`, `.in_progress` and `.completed`)
 * held the event loop 250–320 ms on a slow VM.
 */
export const replayFrames = Effect.fnUntraced(function*(id: string, model: string, record: ReplayRecord, startingAfter?: number) {
  yield* prepareEchoJson(record.echo)
  const encoder = new ResponsesStreamEncoder({ id, model, createdAt: record.createdAt, echo: record.echo, request: makeRequest({ model, messages: [] }) })
  // Small texts go out together, up to CHUNK_CHARS a write; a large one alone.
  const chunks: Array<Uint8Array> = []
  let pending = ""
  const flush = () => {
    if (pending !== "") chunks.push(utf8.encode(pending))
    pending = ""
  }
  const add = (text: string) => {
    if (text.length >= CHUNK_CHARS) {
      flush()
      chunks.push(utf8.encode(text))
    } else {
      pending += text
      if (pending.length >= CHUNK_CHARS) flush()
    }
  }
  // Every frame has the next sequence number (0, 1, 2 …): counted, not read from the frames.
  let sequence = 0
  const wanted = () => {
    const number = sequence++
    return startingAfter === undefined || number > startingAfter
  }
  let events = 0
  let chars = 0
  for (const event of record.events) {
    const whole = event.type === "message_start" || event.type === "message_stop"
    for (const frame of encoder.eventFrames(event)) {
      if (whole) {
        // An envelope frame (maybe megabytes, given as the pieces it is joined from): its pieces
        // encoded a few at a time, none of them a copy of the whole.
        const keep = wanted()
        for (const piece of frame) {
          for (const slice of stringSlices(piece, CHARS_PER_TURN)) {
            if (keep) add(slice)
            chars += slice.length
            if (chars >= CHARS_PER_TURN) {
              events = 0
              chars = 0
              yield* Effect.yieldNow
            }
          }
        }
        continue
      }
      // Any other text may hold several frames, cut at their blank lines (a frame's JSON holds none).
      const text = frame.length === 1 ? frame[0]! : frame.join("")
      for (let at = 0; at < text.length;) {
        const end = text.indexOf("\n\n", at)
        const next = end < 0 ? text.length : end + 2
        if (wanted()) add(at === 0 && next === text.length ? text : text.slice(at, next))
        at = next
      }
      chars += text.length
      if (chars >= CHARS_PER_TURN) {
        events = 0
        chars = 0
        yield* Effect.yieldNow
      }
    }
    if (++events >= EVENTS_PER_TURN) {
      events = 0
      chars = 0
      yield* Effect.yieldNow
    }
  }
  flush()
  return chunks
})
