/**
 * The JSON body of an upstream call, serialized without holding the event loop. A request may
 * carry 32 MiB (a long prompt, base64 images): `JSON.stringify` of it, then undici's UTF-8
 * encoding of the string, each held the loop for tens of milliseconds (hundreds on a busy
 * machine), during which no other client was served.
 *
 * - A small value (under `LARGE_WIRE_UNITS` characters of strings, found by a walk that stops
 *   there) is `JSON.stringify`d at once and sent as a string, as before: the common request pays
 *   only that short walk.
 * - A large one is serialized piece by piece — long strings escaped in slices of `STRING_SLICE`
 *   characters — into UTF-8 chunks, yielding to the event loop every `SLICE_MS`, and sent as a
 *   stream of those chunks with its `content-length`. The text is exactly `JSON.stringify`'s.
 * - `jsonTextInSlices` makes the same text as one string, for what is stored rather than sent (a
 *   batch's request bodies, which come from a 32 MiB upload just as a prompt does).
 */
import { Readable } from "node:stream"
import { Effect } from "effect"

/** Above this many characters (strings plus a few per value) a body is serialized in slices. */
export const LARGE_WIRE_UNITS = 256 * 1024
/** Characters of a long string escaped at once. */
const STRING_SLICE = 64 * 1024
/** Characters gathered before they are encoded into one chunk. */
const CHUNK_UNITS = 64 * 1024
/** Work between two yields to the event loop. */
const SLICE_MS = 2
/** Pieces between two readings of the clock. */
const PIECES_PER_CHECK = 256

/** A body serialized in slices: its UTF-8 chunks and their total length. */
interface ChunkedBody {
  readonly chunks: ReadonlyArray<Uint8Array>
  readonly bytes: number
}

export type UpstreamBody = string | ChunkedBody

/** Whether `value` is over LARGE_WIRE_UNITS characters; stops as soon as it is. */
const isLarge = (value: unknown): boolean => {
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
    if (units > LARGE_WIRE_UNITS) return true
  }
  return false
}

const HIGH_SURROGATE = (code: number) => code >= 0xd800 && code <= 0xdbff

/** What JSON.stringify leaves out of an object and writes as `null` in an array. */
const omitted = (value: unknown) => value === undefined || typeof value === "function" || typeof value === "symbol"

/** The JSON text of `value` in pieces, as JSON.stringify writes it (long strings in slices). */
function* pieces(value: unknown): Generator<string> {
  if (typeof value === "string") {
    if (value.length <= STRING_SLICE) {
      yield JSON.stringify(value)
      return
    }
    yield "\""
    for (let at = 0; at < value.length;) {
      let end = Math.min(value.length, at + STRING_SLICE)
      // Never cut a surrogate pair: each half alone would be written as an escape.
      if (end < value.length && HIGH_SURROGATE(value.charCodeAt(end - 1))) end--
      yield JSON.stringify(value.slice(at, end)).slice(1, -1)
      at = end
    }
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
      else yield* pieces(value[i])
    }
    yield "]"
    return
  }
  yield "{"
  let first = true
  for (const key of Object.keys(value)) {
    const field = (value as Record<string, unknown>)[key]
    if (omitted(field)) continue
    yield `${first ? "" : ","}${JSON.stringify(key)}:`
    first = false
    yield* pieces(field)
  }
  yield "}"
}

/**
 * Feeds `take` the JSON text of `value` piece by piece, yielding to the event loop every
 * `SLICE_MS`. Begins with a yield: the caller's own work on the value (a translation, the walk in
 * `isLarge`) ran in this turn.
 */
const inSlices = (value: unknown, take: (piece: string) => void): Effect.Effect<void> =>
  Effect.gen(function*() {
    yield* Effect.yieldNow
    let started = performance.now()
    // The clock is read every PIECES_PER_CHECK pieces too, not only when a chunk is full: a body
    // of many tiny values takes ~8,000 pieces to fill one, several milliseconds of work.
    let sinceCheck = 0
    for (const piece of pieces(value)) {
      take(piece)
      if (++sinceCheck >= PIECES_PER_CHECK) {
        sinceCheck = 0
        if (performance.now() - started >= SLICE_MS) {
          yield* Effect.yieldNow
          started = performance.now()
        }
      }
    }
  })

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

/** The body of `value` for an upstream call: a string when small, else UTF-8 chunks made in slices. */
export const upstreamBody = (value: unknown): Effect.Effect<UpstreamBody> =>
  Effect.suspend((): Effect.Effect<UpstreamBody> => {
    if (!isLarge(value)) return Effect.succeed(JSON.stringify(value))
    const chunks: Array<Uint8Array> = []
    let bytes = 0
    const groups = grouped((text) => {
      const chunk = Buffer.from(text)
      chunks.push(chunk)
      bytes += chunk.length
    })
    return inSlices(value, groups.take).pipe(Effect.map((): UpstreamBody => {
      groups.end()
      return { chunks, bytes }
    }))
  })

/**
 * `JSON.stringify(value)`, the same text, made in slices when large (a batch's stored request
 * bodies): only the last join of the groups runs at once, a copy of the text.
 */
export const jsonTextInSlices = (value: unknown): Effect.Effect<string> =>
  Effect.suspend((): Effect.Effect<string> => {
    if (!isLarge(value)) return Effect.succeed(JSON.stringify(value))
    const texts: Array<string> = []
    const groups = grouped((text) => texts.push(text))
    return inSlices(value, groups.take).pipe(
      Effect.andThen(Effect.yieldNow),
      Effect.map(() => {
        groups.end()
        return texts.join("")
      })
    )
  })

/**
 * From this many characters on, a body is handed to undici as a stream that lets go of it once
 * sent (`SentOnce`). Undici keeps a call's body as long as the call lasts — and a streamed answer
 * lasts minutes: given a string, it keeps its UTF-8 copy (a 32 KiB prompt: 32 KiB more per open
 * stream, beside the request the gateway itself holds). Below this, the string: a stream costs a
 * few more steps per call, and a small copy is small.
 */
export const RELEASED_BODY_CHARS = 16 * 1024

/**
 * A body's chunks as a stream that drops each reference as it hands the chunk on. Once undici has
 * written it (the socket holds what it has not sent yet, as for any write), nothing of the body is
 * left in the call, however long the answer takes.
 */
class SentOnce extends Readable {
  private chunks: ReadonlyArray<Uint8Array> | undefined
  private next = 0

  constructor(chunks: ReadonlyArray<Uint8Array>) {
    super()
    this.chunks = chunks
  }

  override _read() {
    const chunks = this.chunks
    if (chunks === undefined || this.next >= chunks.length) {
      this.chunks = undefined
      this.push(null)
      return
    }
    this.push(chunks[this.next++])
  }
}

/** A body as undici is given it. */
export interface SendableBody {
  readonly content: string | Readable
  /** Bytes of a stream's content (its `content-length`); undefined for a string. */
  readonly contentLength: number | undefined
}

/**
 * A small string as it is; else a stream of its UTF-8 chunks that lets go of them once sent, with
 * its length (`SentOnce`). Made for one attempt — a stream is read once, so a retried call makes a
 * new one — and in place of the serialized body, so that what an upstream call keeps while it
 * waits (its stack frames, its finalizers) holds no copy of it.
 */
export const sendable = (body: UpstreamBody): SendableBody => {
  if (typeof body !== "string") return { content: new SentOnce(body.chunks), contentLength: body.bytes }
  if (body.length < RELEASED_BODY_CHARS) return { content: body, contentLength: undefined }
  const bytes = Buffer.from(body)
  return { content: new SentOnce([bytes]), contentLength: bytes.length }
}

/** What to hand undici: the content, and the headers with its `content-length` when it is a stream. */
export const requestBody = (body: SendableBody, headers: Record<string, string>): { body: string | Readable; headers: Record<string, string> } =>
  body.contentLength === undefined
    ? { body: body.content, headers }
    : { body: body.content, headers: { ...headers, "content-length": String(body.contentLength) } }

/** The body as text (tests, logs). */
export const bodyText = (body: UpstreamBody): string =>
  typeof body === "string" ? body : Buffer.concat(body.chunks as Array<Uint8Array>).toString("utf8")
