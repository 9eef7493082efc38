/**
 * An upstream's response bytes decoded into canonical events with one step per upstream read,
 * never one per event: each read's events go on as one chunk (or the read is skipped when it
 * completed none). Both HTTP backends decode this way; the stream's per-event cost is then the
 * decoder's own, not the stream machinery's.
 *
 * Events decoded before an error in the same read are still delivered, then the error.
 */
import { Cause, Effect, Stream } from "effect"
import type { NonEmptyReadonlyArray } from "effect/Array"
import type * as Pull from "effect/Pull"
import type { CanonicalEvent } from "../model/events.ts"
import type { BackendError } from "./backend.ts"

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

const isNonEmpty = <A>(as: ReadonlyArray<A>): as is NonEmptyReadonlyArray<A> => as.length > 0

export const decodeBody = <E>(bytes: Stream.Stream<Uint8Array, E>, decoder: BodyDecoder): Stream.Stream<CanonicalEvent, E | BackendError> =>
  Stream.transformPull(bytes, (pull) =>
    Effect.sync(() => {
      let failure: BackendError | undefined
      let ended = false
      /** The read's events, completed by `finish` when they end the answer. */
      const emit = (events: NonEmptyReadonlyArray<CanonicalEvent>): Pull.Pull<NonEmptyReadonlyArray<CanonicalEvent>, E | BackendError> =>
        decoder.finish === undefined || events[events.length - 1].type !== "message_stop"
          ? Effect.succeed(events)
          : Effect.map(decoder.finish(events), (done) => (isNonEmpty(done) ? done : events))
      const next: Pull.Pull<NonEmptyReadonlyArray<CanonicalEvent>, E | BackendError> = Effect.suspend(() => {
        if (failure !== undefined) return Effect.fail(failure)
        if (ended) return Cause.done()
        return Effect.matchEffect(pull, {
          onSuccess: (chunks) => {
            const events: Array<CanonicalEvent> = []
            for (const chunk of chunks) {
              const step = decoder.feed(chunk)
              for (const event of step.events) events.push(event)
              if (step.error !== undefined) {
                failure = step.error
                break
              }
            }
            return isNonEmpty(events) ? emit(events) : next
          },
          onFailure: (error) => {
            if (!Cause.isDone(error)) return Effect.fail(error)
            ended = true
            const step = decoder.end()
            failure = step.error
            return isNonEmpty(step.events) ? emit(step.events) : next
          }
        })
      })
      return next
    }))
