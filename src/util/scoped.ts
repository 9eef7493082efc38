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
import { Cause, Channel, Effect, type Exit, Pull, Scope, Stream } from "effect"
import type { NonEmptyReadonlyArray } from "effect/Array"

/** `Effect.acquireRelease` for a release that needs no services: acquired uninterruptibly, released when the scope closes. */
export const acquireReleasePlain = <A, E, R>(
  acquire: Effect.Effect<A, E, R>,
  release: (resource: A) => Effect.Effect<unknown>
): Effect.Effect<A, E, R | Scope.Scope> =>
  Effect.flatMap(Effect.scope, (scope) =>
    Effect.uninterruptible(Effect.tap(acquire, (resource) => Scope.addFinalizerExit(scope, finalizer(release, resource)))))

/**
 * `acquireReleasePlain` for an acquire that may be abandoned midway — an upstream call, which aborts
 * when interrupted: waiting for it stays interruptible, so a client that leaves before the upstream
 * has answered ends the call at once rather than when the headers come (or the upstream times
 * out); once acquired, the release is registered before anything can interrupt.
 *
 * `release` is called as soon as the resource is acquired and returns the scope's finalizer, a
 * function of the scope's exit called when it closes: the scope keeps only what that function
 * holds (an upstream response's body, not its headers), for as long as a stream stays open. So
 * `release` must only make it. (A finalizer function rather than an effect: an effect kept until
 * the close is one object more, and `Scope.addFinalizer` wraps it in a closure of its own.)
 */
export const acquireInterruptible = <A, E, R>(
  acquire: Effect.Effect<A, E, R>,
  release: (resource: A) => (exit: Exit.Exit<unknown, unknown>) => Effect.Effect<unknown>
): Effect.Effect<A, E, R | Scope.Scope> =>
  Effect.flatMap(Effect.scope, (scope) =>
    Effect.uninterruptibleMask((restore) => Effect.tap(restore(acquire), (resource) => Scope.addFinalizerExit(scope, release(resource)))))

/**
 * The finalizer, made outside `acquireReleasePlain`'s own closures: one made there shares their
 * scope, which holds `acquire`, so the finalizer kept the acquiring effect — and whatever that
 * captured, an upstream call's whole request body — until the scope closed: for as long as a
 * stream stayed open. A function of the exit, as the scope keeps it: `Scope.addFinalizer` would
 * wrap an effect in a closure of its own (with a `suspend` around the release, ~130 bytes a
 * stream kept).
 */
const finalizer = <A>(release: (resource: A) => Effect.Effect<unknown>, resource: A) => (_exit: Exit.Exit<unknown, unknown>) => release(resource)

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

/**
 * `Stream.onExit` without a generator made per call: Effect's (through `Channel.fromTransformBracket`)
 * creates a `function*` closure for every stream it wraps, and V8 gives each generator closure an
 * old-generation map that keeps its scope — the request — alive through young-generation
 * collections until the next full GC (8 per streamed answer before this: `--log-maps` counted them;
 * see `answer` in http/chat-answer.ts). Same semantics: the finalizer runs once, with the stream's
 * own exit, as soon as it ends or fails, or when the scope that runs it closes (interrupted,
 * abandoned).
 */
export const onExitPlain = <A, E, R>(
  self: Stream.Stream<A, E, R>,
  finalizer: (exit: Exit.Exit<unknown, E>) => Effect.Effect<unknown>
): Stream.Stream<A, E, R> =>
  Stream.fromChannel(Channel.fromTransform((upstream: Pull.Pull<unknown, unknown, unknown>, scope: Scope.Scope) => {
    const { once, onCause } = runOnce(finalizer as (exit: Exit.Exit<unknown, unknown>) => Effect.Effect<unknown>)
    return Scope.addFinalizerExit(scope, once).pipe(
      Effect.andThen(Channel.toTransform(Stream.toChannel(self))(upstream, scope)),
      Effect.onError(onCause),
      Effect.map((pull) => Effect.onError(pull, onCause))
    )
  })) as Stream.Stream<A, E, R>

/**
 * `onExitPlain`'s finalizer, registered on the stream's scope itself and run at most once
 * (whichever comes first: the stream's end or the scope's close), rather than in a scope forked
 * for it: a forked scope (its object, state and key) and its entry in the parent were ~300 bytes
 * an open stream held. Made here, not in `onExitPlain`, so what the open stream keeps (these two)
 * does not close over the stream it wraps.
 */
const runOnce = (finalizer: (exit: Exit.Exit<unknown, unknown>) => Effect.Effect<unknown>) => {
  let pending: typeof finalizer | undefined = finalizer
  const once = (exit: Exit.Exit<unknown, unknown>) => {
    const run = pending
    pending = undefined
    return run === undefined ? Effect.void : run(exit)
  }
  return { once, onCause: (cause: Cause.Cause<unknown>) => once(Pull.doneExitFromCause(cause)) }
}

/**
 * `Stream.unwrap` whose pull lets go of the opening effect once it has opened the stream. Effect's
 * keeps it for as long as the stream is pulled (its pull closes over the channel it opened): for
 * an upstream call, the request, the wire body and every step that sent it, held for as long as
 * the answer streams. Opened at the first pull, in the stream's scope, as Effect's; an opening
 * that fails is tried again by a later pull, as Effect's.
 */
export const unwrapPlain = <A, E, E2, R>(open: Effect.Effect<Stream.Stream<A, E>, E2, R>): Stream.Stream<A, E | E2, Exclude<R, Scope.Scope>> =>
  Stream.fromChannel(Channel.fromTransform((upstream: Pull.Pull<unknown, unknown, unknown>, scope: Scope.Scope) =>
    Effect.succeed(pullOnceOpened(open as Effect.Effect<Stream.Stream<A, E>, E2>, upstream, scope)))) as Stream.Stream<A, E | E2, Exclude<R, Scope.Scope>>

const pullOnceOpened = <A, E, E2>(open: Effect.Effect<Stream.Stream<A, E>, E2>, upstream: Pull.Pull<unknown, unknown, unknown>, scope: Scope.Scope) => {
  const state: { open: Effect.Effect<Stream.Stream<A, E>, E2> | undefined; pull: Pull.Pull<NonEmptyReadonlyArray<A>, E | E2> | undefined } = { open, pull: undefined }
  const opening = Effect.suspend(() =>
    state.open!.pipe(
      Scope.provide(scope),
      Effect.flatMap((stream) => Channel.toTransform(Stream.toChannel(stream))(upstream, scope)),
      Effect.flatMap((pull) => {
        state.pull = pull
        state.open = undefined
        return pull
      })
    ))
  return Effect.suspend(() => state.pull ?? opening)
}
