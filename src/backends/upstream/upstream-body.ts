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
 *   (The slicing itself: `util/sliced-stringify.ts`.)
 */
import { Readable } from "node:stream"
import { Effect } from "effect"
import { type ChunkedBody, isLarge, jsonChunksInSlices } from "../../util/sliced-stringify.ts"

export type UpstreamBody = string | ChunkedBody

/** The body of `value` for an upstream call: a string when small, else UTF-8 chunks made in slices. */
export const upstreamBody = (value: unknown): Effect.Effect<UpstreamBody> =>
  Effect.suspend((): Effect.Effect<UpstreamBody> => isLarge(value) ? jsonChunksInSlices(value) : Effect.succeed(JSON.stringify(value)))

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
