/**
 * A deadline on storage work done for a request. A database that is down fails at once, but one
 * that stalls (a partition, a lock, a frozen disk) leaves a statement waiting without end — and the
 * request with it. At the deadline the request fails with a retryable `SqlError`, which the one
 * storage-failure renderer (`http/app.ts`) answers as 503. The work runs on a fiber of its own and
 * is interrupted then without being waited for: interrupting a statement means cancelling it, and
 * on a stalled connection the SQL client gives up on that only 5 s later (closing it).
 */
import { Effect, Fiber } from "effect"
import { SqlError } from "effect/sql"

const noAnswer = (ms: number) =>
  new SqlError.SqlError({
    reason: new SqlError.ConnectionError({
      cause: new Error(`the database gave no answer within ${ms} ms`),
      message: `the database gave no answer within ${ms} ms`,
      operation: "deadline"
    })
  })

export const withinStorageDeadline = (ms: number) =>
<A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E | SqlError.SqlError, R> =>
  Effect.flatMap(Effect.forkDetach(effect), (work) => {
    const letGo = Effect.asVoid(Effect.forkDetach(Fiber.interrupt(work)))
    return Fiber.join(work).pipe(
      Effect.timeoutOrElse({ duration: ms, orElse: () => Effect.andThen(letGo, Effect.fail(noAnswer(ms))) }),
      Effect.onInterrupt(() => letGo)
    )
  })
