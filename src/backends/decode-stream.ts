/**
 * An upstream's response body decoded into canonical events, read straight from the body: each
 * read's bytes are fed to the decoder in the read's own callback, and the stream's fiber resumes
 * only when a read completed events (as one chunk), the body ended or the call failed. A read that
 * completed no event costs no Effect step, and there is no separate byte stream in between: the
 * per-chunk cost is the decoder's own. Both HTTP backends decode this way.
 *
 * Events decoded before an error in the same read are still delivered, then the error. Ending or
 * interrupting the stream does not release the body: its owner does (`destroy()` in a finalizer).
 *
 * A body whose bytes keep coming but complete no event (SSE comments, Anthropic's `ping`s) for
 * `noProgressMs` while a pull waits (counted from the first such read: a pull that completes
 * events at once reads no clock) fails as a silent one does by undici's body timeout (which such
 * bytes reset): else an upstream that only kept the connection alive held its client, and a
 * capacity slot, for ever.
 */
import { Cause, Effect, Stream } from "effect"
import type { NonEmptyReadonlyArray } from "effect/Array"
import type * as Pull from "effect/Pull"
import type { CanonicalEvent } from "../model/events.ts"
import { type BackendError, backendErrorFromStatus } from "./backend.ts"
import { connectionError, UPSTREAM_TIMEOUT_MS } from "./upstream/upstream.ts"
import { runInSlices, type Sliced } from "../util/slices.ts"
import type { BodyRead, StreamedBody } from "./upstream/upstream-call.ts"

/** What one read (or the end) of the body completed. */
export interface DecodeStep {
  readonly events: ReadonlyArray<CanonicalEvent>
  readonly error?: BackendError | undefined
}

export interface BodyDecoder {
  feed(bytes: Uint8Array): DecodeStep
  /** The body ended: whatever it completed, or why it was not a whole answer. */
  end(): DecodeStep
  /**
   * Completes the events of the read that ended the answer (its last event is `message_stop`),
   * e.g. with usage counted exactly when the upstream reported none. Runs once.
   */
  finish?: ((events: ReadonlyArray<CanonicalEvent>) => Effect.Effect<ReadonlyArray<CanonicalEvent>>) | undefined
}

type EventsPull = Pull.Pull<NonEmptyReadonlyArray<CanonicalEvent>, BackendError>

const spanOf = (ms: number) => (ms >= 60_000 && ms % 60_000 === 0 ? `${ms / 60_000} min` : `${ms} ms`)

const isNonEmpty = <A>(as: ReadonlyArray<A>): as is NonEmptyReadonlyArray<A> => as.length > 0

export const decodeBody = (body: StreamedBody, decoder: BodyDecoder, noProgressMs = UPSTREAM_TIMEOUT_MS): Stream.Stream<CanonicalEvent, BackendError> =>
  Stream.fromPull(Effect.sync(() => new BodyEvents(body, decoder, noProgressMs).pull))

/** The most of a whole answer's bytes fed to its decoder at once (as a socket's read gives them). */
const WHOLE_PIECE_BYTES = 64 * 1024

/**
 * A whole answer that came as SSE (an upstream that streams whatever `stream` says), already read:
 * decoded as a stream's reads are, by the same decoder, a piece at a time with a pause for the
 * event loop whenever the work has run a slice (`runInSlices`) — decoded at once, 30 MiB of small
 * events held every other client for a second or more. The first error fails it; the answer's
 * events are completed by `finish`, as a stream's last read is.
 */
export const decodeWhole = (chunks: ReadonlyArray<Uint8Array>, decoder: BodyDecoder): Effect.Effect<ReadonlyArray<CanonicalEvent>, BackendError> =>
  Effect.flatMap(runInSlices(wholeSteps(chunks, decoder)), ({ events, error }) => {
    if (error !== undefined) return Effect.fail(error)
    const finish = decoder.finish
    return finish === undefined || events.at(-1)?.type !== "message_stop" ? Effect.succeed(events) : finish(events)
  })

function* wholeSteps(chunks: ReadonlyArray<Uint8Array>, decoder: BodyDecoder): Sliced<DecodeStep> {
  const events: Array<CanonicalEvent> = []
  const take = (step: DecodeStep) => {
    for (const event of step.events) events.push(event)
    return step.error
  }
  for (const chunk of chunks) {
    for (let at = 0; at < chunk.length; at += WHOLE_PIECE_BYTES) {
      const error = take(decoder.feed(chunk.subarray(at, at + WHOLE_PIECE_BYTES)))
      if (error !== undefined) return { events, error }
      yield
    }
  }
  return { events, error: take(decoder.end()) }
}

/**
 * One body's decoding, as one object with its steps as methods: an open stream holds it for as
 * long as it lasts (closures per step, and one per pull waiting for a read, held ~1 KiB each).
 */
class BodyEvents {
  readonly #body: StreamedBody
  readonly #decoder: BodyDecoder
  readonly #noProgressMs: number
  /**
   * When the pull now waiting first got a read that completed no event; 0 until then (the
   * client's own pauses between pulls do not count).
   */
  #idleSince = 0
  #failure: BackendError | undefined = undefined
  #ended = false
  /** The pull waiting for a read to complete events. */
  #resume: ((effect: EventsPull) => void) | undefined = undefined
  readonly #onRead = (result: BodyRead) => this.onRead(result)
  readonly #waitForRead = (resume: (effect: EventsPull) => void) => {
    this.#resume = resume
    this.#idleSince = 0
    this.#body.read(this.#onRead)
  }
  readonly pull: EventsPull = Effect.suspend(() => {
    if (this.#failure !== undefined) return Effect.fail(this.#failure)
    if (this.#ended) return Cause.done()
    return Effect.callback<NonEmptyReadonlyArray<CanonicalEvent>, BackendError | Cause.Done>(this.#waitForRead)
  })

  constructor(body: StreamedBody, decoder: BodyDecoder, noProgressMs: number) {
    this.#body = body
    this.#decoder = decoder
    this.#noProgressMs = noProgressMs
  }

  private onRead(result: BodyRead): void {
    if (result._tag === "Chunk") {
      const settled = this.settle(this.#decoder.feed(result.chunk))
      if (settled !== undefined) return this.resume(settled)
      const now = performance.now()
      if (this.#idleSince === 0) this.#idleSince = now
      else if (now - this.#idleSince > this.#noProgressMs) {
        this.#failure = backendErrorFromStatus(502, `The upstream completed no event in ${spanOf(this.#noProgressMs)}, though it kept sending (keepalives?)`)
        return this.resume(Effect.fail(this.#failure))
      }
      // A read that completed nothing (half an event): wait for the next one, no step.
      return this.#body.read(this.#onRead)
    }
    if (result._tag === "End") {
      this.#ended = true
      return this.resume(this.settle(this.#decoder.end()) ?? Cause.done())
    }
    this.#failure = connectionError(result.error)
    this.resume(Effect.fail(this.#failure))
  }

  private resume(effect: EventsPull) {
    const resume = this.#resume!
    this.#resume = undefined
    resume(effect)
  }

  /** After a step: its events, else its error, else undefined (read on). */
  private settle(step: DecodeStep): EventsPull | undefined {
    if (step.error !== undefined) this.#failure = step.error
    if (isNonEmpty(step.events)) return this.emit(step.events)
    if (this.#failure !== undefined) return Effect.fail(this.#failure)
    return undefined
  }

  /** The read's events, completed by `finish` when they end the answer. */
  private emit(events: NonEmptyReadonlyArray<CanonicalEvent>): EventsPull {
    const finish = this.#decoder.finish
    return finish === undefined || events[events.length - 1].type !== "message_stop"
      ? Effect.succeed(events)
      : Effect.map(finish(events), (done) => (isNonEmpty(done) ? done : events))
  }
}
