/**
 * Storage failures as typed failures, and what they mean for the client.
 *
 * - `keepTransactionFailures`: Effect's `withTransaction` rolls back with `Effect.orDie`, so when
 *   the connection dies inside a transaction the failed rollback turns the body's `SqlError` into
 *   a defect (and the body's own failure is lost). Every caller expects a `SqlError` failure (a
 *   503, a retry), so the client's `withTransaction` is wrapped once, where the client is made:
 *   a cause whose only defects are `SqlError`s becomes a failure again.
 * - `sqlState` / `isDataException`: PostgreSQL's SQLSTATE, which `@effect/sql-pg` keeps as the
 *   `code` of the reason's cause. Class 22 (data exception: a NUL in text, an invalid escape, a
 *   number or date out of range) means the value sent cannot be stored — the client's mistake.
 */
import { Cause, Effect, Option } from "effect"
import { type SqlClient, SqlError } from "effect/sql"

/** The SQLSTATE of a failed statement (`22P05`, `08006`, …), when the server sent one. */
export const sqlState = (error: SqlError.SqlError): string | undefined => {
  const code = (error.reason.cause as { readonly code?: unknown } | undefined)?.code
  return typeof code === "string" ? code : undefined
}

/** PostgreSQL's own message for a failed statement (without the driver's wrapper text). */
export const serverMessage = (error: SqlError.SqlError): string | undefined => {
  const cause = error.reason.cause
  return cause instanceof Error && sqlState(error) !== undefined ? cause.message : undefined
}

/** Class 22: the data sent cannot be stored (bad text, a number or date out of range). */
export const isDataException = (error: SqlError.SqlError) => sqlState(error)?.startsWith("22") === true

/** Class 54: a program limit (a value too large or complex for the store). */
export const isProgramLimit = (error: SqlError.SqlError) => sqlState(error)?.startsWith("54") === true

/**
 * What a failed statement means for the client — the one rule every surface renders from:
 * - `"refused-value"`: class 22 (data exception), the value sent cannot be stored (a 400);
 * - `"too-large"`: class 54 (program limit), a value too large or complex for the store (a 413);
 * - `"outage"`: anything else — a lost connection, a full disk (53100), a crashed server, a
 *   timeout: the store's fault, never the client's, so a retryable 503.
 */
export type StorageFailureKind = "refused-value" | "too-large" | "outage"

export const storageFailureKind = (error: SqlError.SqlError): StorageFailureKind =>
  isDataException(error) ? "refused-value" : isProgramLimit(error) ? "too-large" : "outage"

/** The `SqlError` a cause holds only as defects (none of its defects is anything else), if any. */
export const sqlErrorDefect = (cause: Cause.Cause<unknown>): SqlError.SqlError | undefined => {
  if (cause.reasons.some(Cause.isInterruptReason)) return undefined
  const defects = cause.reasons.filter(Cause.isDieReason).map((reason) => reason.defect)
  if (defects.length === 0 || !defects.every(SqlError.isSqlError)) return undefined
  return defects[0] as SqlError.SqlError
}

/** A failure stays a failure; `SqlError` defects (a failed rollback) become the failure. */
const recover = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E | SqlError.SqlError, R> =>
  Effect.catchCause(effect, (cause): Effect.Effect<never, E | SqlError.SqlError> => {
    const sqlDefect = sqlErrorDefect(cause)
    if (sqlDefect === undefined) return Effect.failCause(cause)
    const failure = Cause.findErrorOption(cause)
    return Effect.fail(Option.isSome(failure) ? failure.value : sqlDefect)
  })

/** Wraps the client's `withTransaction` once (see the module comment). */
export const keepTransactionFailures = (client: SqlClient.SqlClient): void => {
  const withTransaction = client.withTransaction
  ;(client as { withTransaction: SqlClient.SqlClient["withTransaction"] }).withTransaction = (effect) =>
    recover(withTransaction(effect))
}
