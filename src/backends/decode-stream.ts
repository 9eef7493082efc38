/**
 * An upstream's response body decoded into canonical events, read straight from the body: each
 * read's bytes are fed to the decoder in the read's own callback, and the stream's fiber resumes
 * only when a read completed events (as one chunk), the body ended or the call failed. A read that
 * completed no event costs no Effect step, and there is no separate byte stream in between: the
 * per-chunk cost is the decoder's own. Both HTTP backends decode this way.
 *
 * Events decoded before an error in the same read are still delivered, then the error. Ending or
 * interrupting the stream does not release the body: its owner does (`destroy()` in a finalizer).
 */
import { Cause, Effect, Stream } from "effect"
import type { NonEmptyReadonlyArray } from "effect/Array"
import type * as Pull from "effect/Pull"
import type { CanonicalEvent } from "../model/events.ts"
import type { BackendError } from "./backend.ts"
import { connectionError } from "./upstream/upstream.ts"
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

const isNonEmpty = <A>(as: ReadonlyArray<A>): as is NonEmptyReadonlyArray<A> => as.length > 0

export const decodeBody = (body: StreamedBody, decoder: BodyDecoder): Stream.Stream<CanonicalEvent, BackendError> =>
  Stream.fromPull(Effect.sync(() => {
    let failure: BackendError | undefined
    let ended = false
    /** The read's events, completed by `finish` when they end the answer. */
    const emit = (events: NonEmptyReadonlyArray<CanonicalEvent>): EventsPull =>
      decoder.finish === undefined || events[events.length - 1].type !== "message_stop"
        ? Effect.succeed(events)
        : Effect.map(decoder.finish(events), (done) => (isNonEmpty(done) ? done : events))
    /** After a step: its events, else its error, else undefined (read on). */
    const settle = (step: DecodeStep): EventsPull | undefined => {
      if (step.error !== undefined) failure = step.error
      if (isNonEmpty(step.events)) return emit(step.events)
      if (failure !== undefined) return Effect.fail(failure)
      return undefined
    }
    const pull: EventsPull = Effect.suspend(() => {
      if (failure !== undefined) return Effect.fail(failure)
      if (ended) return Cause.done()
      return Effect.callback<NonEmptyReadonlyArray<CanonicalEvent>, BackendError | Cause.Done>((resume) => {
        const onRead = (result: BodyRead): void => {
          if (result._tag === "Chunk") {
            const settled = settle(decoder.feed(result.chunk))
            // A read that completed nothing (half an event): wait for the next one, no step.
            return settled === undefined ? body.read(onRead) : resume(settled)
          }
          if (result._tag === "End") {
            ended = true
            return resume(settle(decoder.end()) ?? Cause.done())
          }
          failure = connectionError(result.error)
          resume(Effect.fail(failure))
        }
        body.read(onRead)
      })
    })
    return pull
  }))
