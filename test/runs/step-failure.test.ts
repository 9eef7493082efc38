/** How a run reads each failure (retry or end, and the spec error type it shows), and its backoff. */
import { describe, expect, it } from "vitest"
import { BackendError } from "../../src/backends/backend.ts"
import { InvalidRequest, LimitExceeded, NotImplemented, ServiceUnavailable } from "../../src/errors.ts"
import { QueueTimeout } from "../../src/runtime/capacity-queue-types.ts"
import { classify, MAX_RETRY_DELAY_MS, retryDelayMs } from "../../src/runs/step-failure.ts"

describe("step failures", () => {
  it("maps every failure to retry-or-end and a spec error type, never an internal tag", () => {
    const cases: Array<[unknown, boolean, string, string]> = [
      [new BackendError({ status: 500, type: "api_error", message: "boom", retryable: true }), true, "model_error", "api_error"],
      [new BackendError({ status: 529, type: "overloaded_error", message: "busy", retryable: true }), true, "model_error", "api_error"],
      [new BackendError({ status: 429, type: "rate_limit_error", message: "slow down", retryable: true }), true, "model_error", "api_error"],
      [new BackendError({ status: 400, type: "invalid_request_error", message: "bad", retryable: false }), false, "model_error", "invalid_request_error"],
      [new QueueTimeout({ message: "waited", waitedMs: 1, retryAfterSeconds: 3 }), true, "model_error", "api_error"],
      [new ServiceUnavailable({ status: 503, message: "The allowance store is unavailable", retryAfterSeconds: 1 }), true, "model_error", "api_error"],
      [new LimitExceeded({ kind: "rate_limit_error", message: "rpm", retryAfterSeconds: 7 }), true, "model_error", "rate_limit_error"],
      [new LimitExceeded({ kind: "allowance_exhausted", message: "spent", retryAfterSeconds: 99 }), false, "model_error", "allowance_exhausted"],
      [new LimitExceeded({ kind: "credits_exhausted", message: "empty" }), false, "model_error", "credits_exhausted"],
      [new NotImplemented({ message: "no placement" }), false, "model_error", "not_implemented"],
      [new InvalidRequest({ message: "images" }), false, "execution_error", "invalid_request_error"],
      [new Error("a bug"), false, "execution_error", "api_error"]
    ]
    for (const [error, retryable, reason, type] of cases) {
      const failure = classify(error)
      expect({ retryable: failure.retryable, reason: failure.reason, type: failure.error.type }, String(error)).toEqual({ retryable, reason, type })
      expect(failure.error.message).not.toBe("")
    }
    expect(classify(new LimitExceeded({ kind: "rate_limit_error", message: "rpm", retryAfterSeconds: 7 })).retryAfterMs).toBe(7_000)
  })

  it("backs off exponentially with ±20% jitter, capped at a minute; a rate limit waits exactly its retry-after", () => {
    const outage = classify(new ServiceUnavailable({ status: 503, message: "down", retryAfterSeconds: 1 }))
    expect([1, 2, 3, 4].map((n) => retryDelayMs(n, outage, 1_000, () => 0.5))).toEqual([1_000, 2_000, 4_000, 8_000])
    expect(retryDelayMs(1, outage, 1_000, () => 0)).toBe(800)
    expect(retryDelayMs(1, outage, 1_000, () => 0.999999)).toBe(1_200)
    expect(retryDelayMs(12, outage, 1_000, () => 0.999999)).toBe(MAX_RETRY_DELAY_MS)
    const limited = classify(new LimitExceeded({ kind: "rate_limit_error", message: "rpm", retryAfterSeconds: 7 }))
    expect(retryDelayMs(1, limited, 1_000, () => 0.9)).toBe(7_000)
  })
})
