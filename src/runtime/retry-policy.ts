/**
 * The spec's retry rules (Errors → Retry rules), in two forms that agree:
 * - `retrySchedule`: an Effect `Schedule` over `BackendError` inputs, for any Effect that calls a
 *   backend (`Effect.retry(call, retrySchedule)`);
 * - `nextDelay(attempt, error)`: the same decision as a pure function, for the dispatcher, which
 *   lets the dispatch machine decide *whether* to retry and asks this *how long* to wait.
 *
 * Rules: only `retryable` errors are retried (429 `rate_limit_error` and 5xx, a broken stream
 * included; backends set the flag). A 429 with `retry-after` waits exactly that long, with no
 * jitter: the upstream told us when — up to a minute (`MAX_HONORED_RETRY_AFTER_SECONDS`); a longer
 * one is not waited out, the request ends with it. Anything else backs off exponentially from one
 * second (1, 2, 4, 8 s) scaled by a random factor in 0.8–1.2. At most five attempts in total, i.e.
 * four retries.
 */
import { Duration, Effect, Schedule } from "effect"
import { asksTooLongAWait, MAX_ATTEMPTS, type AttemptError } from "../../machines/dispatch.ts"
import type { BackendError } from "../backends/backend.ts"

export { MAX_ATTEMPTS }

const BASE_DELAY_MS = 1_000

/** The exact wait a 429 asks for, if it says. */
const retryAfterMs = (error: AttemptError): number | undefined =>
  error.status === 429 && error.retryAfterSeconds !== undefined ? error.retryAfterSeconds * 1_000 : undefined

/**
 * Milliseconds to wait after failed attempt number `attempt` (1-based) before the next one, or
 * `undefined` when the rules say not to retry. `random` returns a number in [0, 1).
 */
export const nextDelay = (
  attempt: number,
  error: AttemptError,
  random: () => number = Math.random,
  baseMs: number = BASE_DELAY_MS
): number | undefined => {
  if (!error.retryable || attempt >= MAX_ATTEMPTS || asksTooLongAWait(error)) return undefined
  const exact = retryAfterMs(error)
  if (exact !== undefined) return exact
  return baseMs * 2 ** (attempt - 1) * (0.8 + 0.4 * random())
}

/**
 * `Effect.retry(call, retrySchedule)`: exponential from one second with `Schedule.jittered`,
 * whose delay is replaced by the exact `retry-after` of a 429, stopping on a non-retryable error
 * or after four retries (five attempts).
 */
export const retrySchedule: Schedule.Schedule<Duration.Duration, BackendError> = Schedule.exponential(BASE_DELAY_MS).pipe(
  Schedule.jittered,
  Schedule.setInputType<BackendError>(),
  Schedule.while(({ input }) => input.retryable && !asksTooLongAWait(input)),
  Schedule.modifyDelay(({ input, duration }) => {
    const exact = retryAfterMs(input)
    return Effect.succeed(exact === undefined ? duration : Duration.millis(exact))
  }),
  Schedule.upTo({ times: MAX_ATTEMPTS - 1 })
)
