/**
 * An effect asked for again and again, run by one fiber at a time: an ask while it runs gets one
 * more run after it (however many asks came meanwhile), an ask while nothing runs starts one.
 *
 * Why: the batch workers look for more work each time a request ends. Forked once per ask, with
 * the refill behind a lock, the asks piled up while a claim's statement ran: 2,900 fibers waiting
 * on the lock on a slow VM (two batches of 1,000), and Effect's Semaphore looks at every waiter on
 * each release, so the event loop was held 100–190 ms at a time for work one run does for all.
 * The allowance's epoch check is the same shape, with callers that need its answer (`fresh`).
 */
import { Deferred, Effect, Exit, type Scope } from "effect"

export interface CoalescedRuns<A, E> {
  /** Starts a run, or marks one more after the running one; does not wait. */
  readonly ask: Effect.Effect<void>
  /**
   * The outcome of a run that started after this call (so it saw everything that happened before
   * it): the next run, shared by every caller that came while the current one ran.
   */
  readonly fresh: Effect.Effect<A, E>
}

/** Runs of `effect` in `scope`, one at a time, the asks made during a run folded into one after it. */
export const coalescedRuns = <A, E>(effect: Effect.Effect<A, E>, scope: Scope.Scope): CoalescedRuns<A, E> => {
  let running = false
  let again = false
  /** The callers of `fresh` waiting for the running run, and those waiting for the next one. */
  let answering: Deferred.Deferred<A, E> | undefined
  let waiting: Deferred.Deferred<A, E> | undefined
  // A failure or a defect of one run does not stop the next.
  const run: Effect.Effect<void> = Effect.suspend(() => {
    again = false
    answering = waiting
    waiting = undefined
    return Effect.flatMap(Effect.exit(effect), (exit: Exit.Exit<A, E>) => {
      if (answering !== undefined) Deferred.doneUnsafe(answering, exit)
      answering = undefined
      if (again) return run
      running = false
      return Effect.void
    })
  })
  // An interruption ends the runs (the scope is closing, maybe before the fiber even started):
  // whoever waits for one is interrupted too, not left hanging.
  const interruptWaiters = () => {
    for (const waiter of [answering, waiting]) if (waiter !== undefined) Deferred.doneUnsafe(waiter, Exit.interrupt())
    answering = waiting = undefined
  }
  const start = Effect.suspend(() => {
    if (running) {
      again = true
      return Effect.void
    }
    running = true
    return Effect.map(Effect.forkIn(run, scope), (fiber) => {
      fiber.addObserver((exit) => {
        if (Exit.hasInterrupts(exit)) interruptWaiters()
      })
    })
  })
  const fresh = Effect.suspend(() => {
    const answer = waiting ??= Deferred.makeUnsafe<A, E>()
    return Effect.andThen(start, Deferred.await(answer))
  })
  return { ask: start, fresh }
}
