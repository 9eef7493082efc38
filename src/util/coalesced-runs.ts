/**
 * An effect asked for again and again, run by one fiber at a time: an ask while it runs gets one
 * more run after it (however many asks came meanwhile), an ask while nothing runs starts one.
 *
 * Why: the batch workers look for more work each time a request ends. Forked once per ask, with
 * the refill behind a lock, the asks piled up while a claim's statement ran: 2,900 fibers waiting
 * on the lock on a slow VM (two batches of 1,000), and Effect's Semaphore looks at every waiter on
 * each release, so the event loop was held 100–190 ms at a time for work one run does for all.
 */
import { Effect, type Scope } from "effect"

/** `ask` starts `effect` in `scope`, or, when a run is going on, marks one more run after it. */
export const coalescedRuns = (effect: Effect.Effect<void>, scope: Scope.Scope): { readonly ask: Effect.Effect<void> } => {
  let running = false
  let again = false
  // A failure or a defect of one run does not stop the next (an interruption ends the fiber: the
  // scope is closing).
  const run: Effect.Effect<void> = Effect.suspend(() => {
    again = false
    return Effect.flatMap(Effect.exit(effect), () => {
      if (again) return run
      running = false
      return Effect.void
    })
  })
  const ask = Effect.suspend(() => {
    if (running) {
      again = true
      return Effect.void
    }
    running = true
    return Effect.asVoid(Effect.forkIn(run, scope))
  })
  return { ask }
}
