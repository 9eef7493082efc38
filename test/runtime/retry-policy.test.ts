import { assert, describe, it } from "@effect/vitest"
import { Effect, Fiber } from "effect"
import { TestClock } from "effect/testing"
import { backendErrorFromStatus, type BackendError } from "../../src/backends/backend.ts"
import { MAX_HONORED_RETRY_AFTER_SECONDS } from "../../machines/dispatch.ts"
import { MAX_ATTEMPTS, nextDelay, retrySchedule } from "../../src/runtime/retry-policy.ts"

const serverError = backendErrorFromStatus(500, "boom")
const rateLimited = backendErrorFromStatus(429, "slow down", 3)
const badRequest = backendErrorFromStatus(400, "bad")

describe("nextDelay", () => {
  it("backs off exponentially from one second with ±20% jitter", () => {
    assert.strictEqual(nextDelay(1, serverError, () => 0), 800)
    assert.strictEqual(nextDelay(1, serverError, () => 0.5), 1_000)
    assert.strictEqual(nextDelay(2, serverError, () => 0.5), 2_000)
    assert.strictEqual(nextDelay(4, serverError, () => 0.5), 8_000)
    assert.closeTo(nextDelay(3, serverError, () => 0.999_999)!, 4_800, 0.01)
  })

  it("waits exactly retry-after on a 429, whatever the jitter", () => {
    assert.strictEqual(nextDelay(1, rateLimited, () => 0), 3_000)
    assert.strictEqual(nextDelay(3, rateLimited, () => 0.9), 3_000)
  })

  it("does not wait out a retry-after longer than a minute (the request ends with it)", () => {
    assert.strictEqual(nextDelay(1, backendErrorFromStatus(429, "slow down", MAX_HONORED_RETRY_AFTER_SECONDS)), MAX_HONORED_RETRY_AFTER_SECONDS * 1_000)
    assert.isUndefined(nextDelay(1, backendErrorFromStatus(429, "come back tomorrow", 86_400)))
  })

  it("does not retry non-retryable errors, nor after the fifth attempt", () => {
    assert.isUndefined(nextDelay(1, badRequest))
    assert.isDefined(nextDelay(MAX_ATTEMPTS - 1, serverError))
    assert.isUndefined(nextDelay(MAX_ATTEMPTS, serverError))
  })
})

describe("retrySchedule", () => {
  const failing = (error: BackendError) => {
    let calls = 0
    const call = Effect.suspend(() => {
      calls++
      return Effect.fail(error)
    })
    return { call, calls: () => calls }
  }

  it.effect("makes five attempts in total, the first retry after 0.8–1.2 s", () =>
    Effect.gen(function*() {
      const { call, calls } = failing(serverError)
      const fiber = yield* Effect.forkChild(Effect.retry(call, retrySchedule))
      yield* TestClock.adjust(799)
      assert.strictEqual(calls(), 1)
      yield* TestClock.adjust(401)
      assert.strictEqual(calls(), 2)
      yield* TestClock.adjust("1 minute")
      const error = yield* Fiber.join(fiber).pipe(Effect.flip)
      assert.strictEqual(error, serverError)
      assert.strictEqual(calls(), MAX_ATTEMPTS)
    }))

  it.effect("a 429 waits exactly retry-after", () =>
    Effect.gen(function*() {
      const { call, calls } = failing(rateLimited)
      yield* Effect.forkChild(Effect.retry(call, retrySchedule))
      yield* TestClock.adjust(2_999)
      assert.strictEqual(calls(), 1)
      yield* TestClock.adjust(1)
      assert.strictEqual(calls(), 2)
      yield* TestClock.adjust(3_000)
      assert.strictEqual(calls(), 3)
    }))

  it.effect("a 429 whose retry-after is longer than a minute is not retried", () =>
    Effect.gen(function*() {
      const tomorrow = backendErrorFromStatus(429, "come back tomorrow", 86_400)
      const { call, calls } = failing(tomorrow)
      const error = yield* Effect.retry(call, retrySchedule).pipe(Effect.flip)
      assert.strictEqual(error, tomorrow)
      assert.strictEqual(calls(), 1)
    }))

  it.effect("a non-retryable error is not retried", () =>
    Effect.gen(function*() {
      const { call, calls } = failing(badRequest)
      const error = yield* Effect.retry(call, retrySchedule).pipe(Effect.flip)
      assert.strictEqual(error, badRequest)
      assert.strictEqual(calls(), 1)
    }))
})
