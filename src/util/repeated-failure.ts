/**
 * A background loop's failures, logged without flooding the log. During an outage a loop that
 * retries every half second fails every time: on a full disk the batch workers' claim and the usage
 * ledger's flush wrote ~3 lines a second for as long as it lasted (2026-12-03, a gateway on a
 * filled tmpfs). Here the first failure is logged at once, with its cause; while failures go on,
 * one line every `everyMs` (a minute) says how many more there were and the latest cause (a failure
 * graver than the last one logged, an error after warnings, at once); the first success after them
 * says the loop recovered and how long the outage lasted. Failures more than `everyMs` apart are
 * separate runs, so a caller with no success to report (a request's storage failure) uses it too.
 *
 * Time is Effect's clock, so a test drives it with `TestClock`.
 */
import { Clock, Effect, Schedule } from "effect"

export type FailureLevel = "warning" | "error"

export class RepeatedFailure {
  private readonly what: string
  private readonly everyMs: number
  /** When the current run of failures began; undefined while the loop succeeds. */
  private since: number | undefined
  private lastLoggedAt = 0
  private lastFailedAt = 0
  private lastLevel: FailureLevel = "warning"
  private unlogged = 0

  constructor(what: string, everyMs = 60_000) {
    this.what = what
    this.everyMs = everyMs
  }

  /** Records a failure: logged if it is the first of a run, or if `everyMs` has passed since the last line. */
  failed(message: string, cause: unknown, level: FailureLevel = "warning"): Effect.Effect<void> {
    return Effect.flatMap(Clock.currentTimeMillis, (now) => {
      const logAt = level === "error" ? Effect.logError : Effect.logWarning
      // A failure with no cause of its own (a connection's error event: its message says it all).
      const log = (text: string, cause: unknown) => (cause === undefined ? logAt(text) : logAt(text, cause))
      // Quiet for longer than `everyMs` since the last failure (where no success is reported, as
      // for requests): a new run of failures.
      if (this.since !== undefined && now - this.lastFailedAt > this.everyMs) this.since = undefined
      this.lastFailedAt = now
      if (this.since === undefined) {
        this.unlogged = 0
        this.since = now
        this.lastLoggedAt = now
        this.lastLevel = level
        return log(`${this.what}: ${message}`, cause)
      }
      // A failure graver than the last one logged is logged at once (the ledger starting to refuse calls).
      const graver = level === "error" && this.lastLevel === "warning"
      this.lastLevel = level
      if (!graver && now - this.lastLoggedAt < this.everyMs) {
        this.unlogged++
        return Effect.void
      }
      const more = this.unlogged
      this.unlogged = 0
      this.lastLoggedAt = now
      return log(`${this.what}: ${message} (failing for ${seconds(now - this.since)} s; ${more} more failures not logged since the last line)`, cause)
    })
  }

  /** Records a success: after a run of failures, says the loop recovered. One Effect, read when it runs. */
  readonly succeeded: Effect.Effect<void> = Effect.suspend(() =>
    this.since === undefined ? Effect.void : Effect.flatMap(Clock.currentTimeMillis, (now) => {
      if (this.since === undefined) return Effect.void
      const lasted = now - this.since
      this.since = undefined
      this.unlogged = 0
      return Effect.logInfo(`${this.what}: recovered after ${seconds(lasted)} s of failures`)
    })
  )
}

const seconds = (ms: number) => (ms / 1000).toFixed(ms < 10_000 ? 1 : 0)

/**
 * A background round run every `everyMs` for as long as the scope is open (a heartbeat, a sweeper,
 * a reaper), its failures logged as one `RepeatedFailure` named `what` and retried at the next round.
 */
export const repeatInScope = (what: string, everyMs: number, round: Effect.Effect<unknown, unknown>) => {
  const failures = new RepeatedFailure(what)
  return Effect.forkScoped(
    round.pipe(
      Effect.andThen(failures.succeeded),
      Effect.catchCause((cause) => failures.failed("failed; retrying", cause)),
      Effect.repeat(Schedule.spaced(`${everyMs} millis`))
    )
  )
}
