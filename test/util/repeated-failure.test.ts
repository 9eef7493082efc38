import { assert, describe, it } from "@effect/vitest"
import { Effect, Logger } from "effect"
import { TestClock } from "effect/testing"
import { RepeatedFailure } from "../../src/util/repeated-failure.ts"

/** Runs `body` with a logger that keeps each line's level and first message part. */
const logged = <A>(body: (lines: Array<string>) => Effect.Effect<A>) => {
  const lines: Array<string> = []
  const logger = Logger.make(({ logLevel, message }) => {
    lines.push(`${logLevel} ${String(Array.isArray(message) ? message[0] : message)}`)
  })
  return body(lines).pipe(Effect.provide(Logger.layer([logger])))
}

describe("RepeatedFailure", () => {
  it.effect("logs the first failure, then a line a minute with how many were not logged, then the recovery", () =>
    logged((lines) =>
      Effect.gen(function*() {
        const failures = new RepeatedFailure("batches")
        // An outage: a failure every half second for 90 s.
        for (let i = 0; i < 180; i++) {
          yield* failures.failed("claiming requests failed; retrying", new Error("disk full"))
          yield* TestClock.adjust(500)
        }
        yield* failures.succeeded
        // Running: nothing more to say.
        yield* failures.succeeded
        assert.deepStrictEqual(lines, [
          "Warn batches: claiming requests failed; retrying",
          "Warn batches: claiming requests failed; retrying (failing for 60 s; 119 more failures not logged since the last line)",
          "Info batches: recovered after 90 s of failures"
        ])
        // A new outage is logged at once again.
        yield* failures.failed("claiming requests failed; retrying", new Error("disk full"))
        assert.strictEqual(lines.length, 4)
      })
    ))

  it.effect("a graver failure (an error after warnings) is logged at once", () =>
    logged((lines) =>
      Effect.gen(function*() {
        const failures = new RepeatedFailure("usage ledger")
        yield* failures.failed("flush failed, will retry (10 pending)", new Error("x"))
        yield* TestClock.adjust(1_000)
        yield* failures.failed("flush failed, will retry (20 pending)", new Error("x"))
        yield* TestClock.adjust(1_000)
        yield* failures.failed("flush failed, will retry (30 pending: new calls are refused until they are written)", new Error("x"), "error")
        yield* TestClock.adjust(1_000)
        yield* failures.failed("flush failed, will retry (30 pending: new calls are refused until they are written)", new Error("x"), "error")
        assert.deepStrictEqual(lines, [
          "Warn usage ledger: flush failed, will retry (10 pending)",
          "Error usage ledger: flush failed, will retry (30 pending: new calls are refused until they are written) (failing for 2.0 s; 1 more failures not logged since the last line)"
        ])
      })
    ))

  it.effect("failures more than a minute apart are separate runs, each logged as a first", () =>
    logged((lines) =>
      Effect.gen(function*() {
        const failures = new RepeatedFailure("storage unavailable")
        yield* failures.failed("a request failed", new Error("x"), "error")
        yield* TestClock.adjust(1_000)
        yield* failures.failed("a request failed", new Error("x"), "error")
        yield* TestClock.adjust(120_000)
        yield* failures.failed("a request failed", new Error("x"), "error")
        assert.deepStrictEqual(lines, ["Error storage unavailable: a request failed", "Error storage unavailable: a request failed"])
      })
    ))
})
