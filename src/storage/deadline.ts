/**
 * A deadline on storage work done for a request. A database that is down fails at once, but one
 * that stalls (a partition, a lock, a frozen disk) leaves a statement waiting without end — and the
 * request with it. At the deadline the request fails with a retryable `SqlError`, which the one
 * storage-failure renderer (`http/app.ts`) answers as 503. The work runs on a fiber of its own and
 * is interrupted then without being waited for: interrupting a statement means cancelling it, and
 * on a stalled connection the SQL client gives up on that only 5 s later (closing it).
 *
 * The deadline is `GATEWAY_STORAGE_TIMEOUT_MS` (`storageDeadlines.read`); work that moves a large
 * document (a file's bytes, a state's or a stored response's up to 8 MiB, in chunks) gets three
 * times it (`storageDeadlines.write`), so a slow machine is not cut off mid-save.
 */
import { Effect, Fiber } from "effect"
import { SqlError } from "effect/sql"
import { Settings } from "../config/settings.ts"

const DEADLINE = "deadline"

const noAnswer = (ms: number) =>
  new SqlError.SqlError({
    reason: new SqlError.ConnectionError({
      cause: new Error(`the database gave no answer within ${ms} ms`),
      message: `the database gave no answer within ${ms} ms`,
      operation: DEADLINE
    })
  })

/** Whether a failure is a deadline's (`withinStorageDeadline`), not the database's own. */
export const isPastDeadline = (error: unknown): boolean =>
  SqlError.isSqlError(error) && error.reason._tag === "ConnectionError" && error.reason.operation === DEADLINE

export const withinStorageDeadline = (ms: number) =>
<A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E | SqlError.SqlError, R> =>
  Effect.flatMap(Effect.forkDetach(effect), (work) => {
    const letGo = Effect.asVoid(Effect.forkDetach(Fiber.interrupt(work)))
    return Fiber.join(work).pipe(
      Effect.timeoutOrElse({ duration: ms, orElse: () => Effect.andThen(letGo, Effect.fail(noAnswer(ms))) }),
      Effect.onInterrupt(() => letGo)
    )
  })

/**
 * The longest the storage may take for one request: three deadlines, for work that moves a large
 * document (see the module comment). PostgreSQL connections give a statement as long to answer
 * (`pg-connection.ts`).
 */
export const longestStorageWaitMs = (storageTimeoutMs: number) => 3 * storageTimeoutMs

/** The request path's two deadlines, from the settings (see the module comment). */
export const storageDeadlines = Effect.gen(function*() {
  const { storageTimeoutMs } = yield* Settings
  return { storageTimeoutMs, read: withinStorageDeadline(storageTimeoutMs), write: withinStorageDeadline(longestStorageWaitMs(storageTimeoutMs)) }
})
