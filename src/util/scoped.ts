/**
 * Resources and stream pulls tied to the enclosing Scope, for the request path.
 *
 * Effect's own `acquireRelease` and `addFinalizer` run the release with the acquiring fiber's
 * services provided again (`provideContext`), which merges two copies of the fiber's context: with
 * the gateway's ~60 services that is ≈27 KiB allocated per request for one finalizer (measured with
 * `bench/alloc-profile.ts`). A release that needs no services — a closure over what it frees —
 * can be registered on the scope directly, which is what these do. Use Effect's versions when the
 * release needs services from the context.
 */
import { Cause, Channel, Effect, type Pull, Scope, Stream } from "effect"
import type { NonEmptyReadonlyArray } from "effect/Array"

/** `Effect.acquireRelease` for a release that needs no services: acquired uninterruptibly, released when the scope closes. */
export const acquireReleasePlain = <A, E, R>(
  acquire: Effect.Effect<A, E, R>,
  release: (resource: A) => Effect.Effect<unknown>
): Effect.Effect<A, E, R | Scope.Scope> =>
  Effect.flatMap(Effect.scope, (scope) =>
    Effect.uninterruptible(Effect.tap(acquire, (resource) => Scope.addFinalizer(scope, Effect.suspend(() => release(resource))))))

/** `Effect.addFinalizer` for a finalizer that needs no services. */
export const addFinalizerPlain = (finalizer: Effect.Effect<unknown>): Effect.Effect<void, never, Scope.Scope> =>
  Effect.flatMap(Effect.scope, (scope) => Scope.addFinalizer(scope, finalizer))

/**
 * `Stream.toPull` for a stream that needs no services, pulled by one consumer at a time. Effect's
 * `toPull` provides the creating fiber's services again on every pull (a context merge: two copies
 * of the fiber's ~60-service map per chunk read, ≈45 KiB per streamed answer) and serializes
 * pulls with a semaphore; this reads the stream's channel directly in the enclosing scope.
 */
export const toPullPlain = <A, E>(stream: Stream.Stream<A, E>): Effect.Effect<Pull.Pull<NonEmptyReadonlyArray<A>, E>, never, Scope.Scope> =>
  Effect.flatMap(Effect.scope, (scope) =>
    Channel.toTransform(Stream.toChannel(stream))(Cause.done(), scope).pipe(
      // As in Effect's toPull: a failure while opening the stream is the first pull's failure.
      Effect.catchCause((cause) => Effect.succeed(Effect.failCause(cause)))
    ))
