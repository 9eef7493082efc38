/** The failure rules both HTTP backends share (backends/upstream/upstream.ts). */
import { describe, expect, it } from "vitest"
import { connectionError, errorFromResponse, MAX_RETRY_AFTER_SECONDS, retryAfterSeconds, scrubError } from "../../src/backends/upstream/upstream.ts"
import { callFailureToApiError } from "../../src/http/chat-answer.ts"

const placement = { modelId: "svc-up", upstreamModel: "secret-model-9" }

describe("upstream failures", () => {
  it("retry-after-ms wins over retry-after, as in both official SDKs; dates and seconds are read", () => {
    const now = Date.parse("2026-01-01T00:00:00Z")
    expect(retryAfterSeconds({ "retry-after": "12", "retry-after-ms": "1500" }, now)).toBe(1.5)
    expect(retryAfterSeconds({ "retry-after": "12" }, now)).toBe(12)
    expect(retryAfterSeconds({ "retry-after": "Thu, 01 Jan 2026 00:00:30 GMT" }, now)).toBe(30)
    expect(retryAfterSeconds({ "retry-after-ms": "not a number", "retry-after": "3" }, now)).toBe(3)
    expect(retryAfterSeconds({}, now)).toBeUndefined()
  })

  it("takes a wait for at most a day: 1e300 seconds or a date centuries ahead (a 500 once) read as a day", () => {
    const now = Date.parse("2026-01-01T00:00:00Z")
    expect(retryAfterSeconds({ "retry-after": "1e300" }, now)).toBe(MAX_RETRY_AFTER_SECONDS)
    expect(retryAfterSeconds({ "retry-after-ms": "1e20" }, now)).toBe(MAX_RETRY_AFTER_SECONDS)
    expect(retryAfterSeconds({ "retry-after": "Wed, 21 Oct 2999 07:28:00 GMT" }, now)).toBe(MAX_RETRY_AFTER_SECONDS)
    expect(retryAfterSeconds({ "retry-after": String(MAX_RETRY_AFTER_SECONDS) }, now)).toBe(MAX_RETRY_AFTER_SECONDS)
    // The gateway's own answer carries it: a 503 whose retry-after is a whole number of seconds.
    const error = errorFromResponse(429, { "retry-after": "1e300" }, "{}", placement)
    expect(callFailureToApiError(error)).toMatchObject({ status: 503, retryAfterSeconds: MAX_RETRY_AFTER_SECONDS })
  })

  it("reads the message of both APIs' error bodies and never names the upstream model", () => {
    const messages = errorFromResponse(429, { "retry-after": "2" }, JSON.stringify({ type: "error", error: { type: "rate_limit_error", message: "slow down, secret-model-9" } }), placement)
    expect(messages).toMatchObject({ status: 429, retryable: true, retryAfterSeconds: 2, message: "slow down, svc-up" })
    const openai = errorFromResponse(400, {}, JSON.stringify({ error: { message: "bad temperature", param: "temperature" } }), placement)
    expect(openai).toMatchObject({ status: 400, retryable: false, message: "bad temperature" })
    expect(errorFromResponse(503, {}, "", placement).message).toBe("The upstream answered HTTP 503")
    // A hostile error body is quoted short: its message, or (past 64 KiB, not parsed) its text.
    const long = errorFromResponse(400, {}, JSON.stringify({ error: { message: "x".repeat(5_000) } }), placement)
    expect(long.message).toBe(`${"x".repeat(1_000)}… (5000 characters)`)
    const huge = errorFromResponse(400, {}, JSON.stringify({ error: { message: "y".repeat(1 << 20) } }), placement)
    expect(huge.message).toBe(`{"error":{"message":"${"y".repeat(500 - 21)}`)
  })

  it("a refused credential or unknown model is the gateway's problem: retryable 502", () => {
    for (const status of [401, 403, 404]) expect(errorFromResponse(status, {}, "{}", placement)).toMatchObject({ status: 502, retryable: true })
  })

  it("a connection failure names its code, never a host; scrubbing replaces the model name", () => {
    const error = connectionError(Object.assign(new Error("connect ECONNREFUSED 10.1.2.3:443"), { code: "ECONNREFUSED" }))
    expect(error).toMatchObject({ status: 502, retryable: true, message: "Could not reach the upstream (ECONNREFUSED)" })
    expect(scrubError(placement)(errorFromResponse(500, {}, "secret-model-9 broke", { modelId: "", upstreamModel: "" })).message).toBe("svc-up broke")
  })
})
