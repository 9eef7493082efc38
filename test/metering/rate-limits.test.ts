/** Rate limits through the real RateLimits service on both coordination stores. */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { TestClock } from "effect/testing"
import { Redis } from "ioredis"
import { inject } from "vitest"
import type { Plan } from "../../src/config/schema.ts"
import { Coordination } from "../../src/coordination/coordination.ts"
import { newId } from "../../src/util/ids.ts"
import { formatResetDuration, RateLimits } from "../../src/metering/rate-limits.ts"
import { dropPrefix, uniquePrefix } from "../coordination/support.ts"
import { storeKinds, untilSuccess } from "./support.ts"

const plan = (limits: Partial<Plan>): Plan => ({ allowanceUsd: 1, rpm: 1_000, tpm: 1_000_000, concurrency: 100, ...limits })
const START = Date.UTC(2030, 4, 15, 12)

describe("formatResetDuration (OpenAI's Go-style durations)", () => {
  it("writes ms below a second, then h/m/s with fractional seconds", () => {
    expect([0, 20, 999, 1_000, 17_200, 60_000, 90_500, 360_000, 3_600_000, 3_723_004].map(formatResetDuration))
      .toEqual(["0s", "20ms", "999ms", "1s", "17.2s", "1m0s", "1m30.5s", "6m0s", "1h0m0s", "1h2m3.004s"])
  })
})

for (const store of storeKinds()) {
  describe(`rate limits (${store.name})`, () => {
    // Time is set before the services exist, so their renewal loop does not replay years of ticks.
    const run = <A, E>(body: Effect.Effect<A, E, RateLimits>) =>
      Effect.andThen(TestClock.setTime(START), body.pipe(Effect.provide(RateLimits.layer.pipe(Layer.provideMerge(store.layer())))))

    it.effect("rpm: a burst of the limit passes, then retry-after says when the next one will", () =>
      run(Effect.gen(function*() {
        const limits = yield* RateLimits
        const keyId = newId("key")
        const admit = limits.admit({ keyId, plan: plan({ rpm: 3 }), tokens: 10 })
        const resets = []
        for (let i = 0; i < 3; i++) {
          const headers = limits.headers((yield* admit).state)
          expect(headers["x-ratelimit-limit-requests"]).toBe("3")
          expect(headers["x-ratelimit-remaining-requests"]).toBe(String(2 - i))
          resets.push(headers["x-ratelimit-reset-requests"])
        }
        expect(resets).toEqual(["20s", "40s", "1m0s"])
        yield* TestClock.adjust(5_000)
        const refused = yield* Effect.flip(admit)
        expect(refused).toMatchObject({ _tag: "LimitExceeded", kind: "rate_limit_error", retryAfterSeconds: 15 })
        expect(refused.message).toContain("requests per minute (limit 3)")
        yield* TestClock.adjust(15_000)
        expect(limits.headers((yield* admit).state)["x-ratelimit-remaining-requests"]).toBe("0")
      })))

    it.effect("tpm counts input estimate + output ceiling; a refusal takes no request", () =>
      run(Effect.gen(function*() {
        const limits = yield* RateLimits
        const keyId = newId("key")
        const p = plan({ rpm: 10, tpm: 1_000 })
        const first = limits.headers((yield* limits.admit({ keyId, plan: p, tokens: 800 })).state)
        expect(first).toMatchObject({
          "x-ratelimit-limit-tokens": "1000",
          "x-ratelimit-remaining-tokens": "200",
          "x-ratelimit-reset-tokens": "48s",
          "x-ratelimit-remaining-requests": "9"
        })
        const refused = yield* Effect.flip(limits.admit({ keyId, plan: p, tokens: 300 }))
        expect(refused).toMatchObject({ kind: "rate_limit_error", retryAfterSeconds: 6 })
        expect(refused.message).toContain("tokens per minute (limit 1000)")
        const next = limits.headers((yield* limits.admit({ keyId, plan: p, tokens: 200 })).state)
        expect(next["x-ratelimit-remaining-requests"]).toBe("8")
        expect(next["x-ratelimit-remaining-tokens"]).toBe("0")
      })))

    it.effect("concurrency: slots are freed by release (once), retry-after 1 s meanwhile", () =>
      run(Effect.gen(function*() {
        const limits = yield* RateLimits
        const keyId = newId("key")
        const admit = limits.admit({ keyId, plan: plan({ concurrency: 2 }), tokens: 1 })
        const a = yield* admit
        yield* admit
        const refused = yield* Effect.flip(admit)
        expect(refused).toMatchObject({ kind: "rate_limit_error", retryAfterSeconds: 1 })
        expect(refused.message).toContain("concurrent requests (limit 2)")
        yield* a.release
        yield* a.release // a second release must not free someone else's slot
        yield* admit
        expect((yield* Effect.flip(admit)).kind).toBe("rate_limit_error")
      })))

    it.effect("a plan change applies at the next request", () =>
      run(Effect.gen(function*() {
        const limits = yield* RateLimits
        const keyId = newId("key")
        yield* limits.admit({ keyId, plan: plan({ rpm: 1 }), tokens: 1 })
        expect((yield* Effect.flip(limits.admit({ keyId, plan: plan({ rpm: 1 }), tokens: 1 }))).kind).toBe("rate_limit_error")
        const upgraded = yield* limits.admit({ keyId, plan: plan({ rpm: 60 }), tokens: 1 })
        expect(limits.headers(upgraded.state)["x-ratelimit-limit-requests"]).toBe("60")
      })))
  })
}

describe("rate limits when the store is unreachable", () => {
  it.live("fail open: the call is admitted, without rate-limit headers", () =>
    Effect.gen(function*() {
      const limits = yield* RateLimits
      const admission = yield* limits.admit({ keyId: newId("key"), plan: plan({ rpm: 1 }), tokens: 1 })
      expect(admission.state).toBeUndefined()
      expect(limits.headers(admission.state)).toEqual({})
      yield* admission.release
    }).pipe(Effect.provide(RateLimits.layer.pipe(
      Layer.provideMerge(Coordination.layerRedis("redis://127.0.0.1:1", { connectTimeoutMs: 200, prefix: uniquePrefix() }))
    ))))
})

const { redisUrl } = inject("services")
describe.skipIf(redisUrl === null)("concurrency leases across instances (redis)", () => {
  it.live("a dead instance's leases lapse by Redis TTL; a live one's are renewed", () => {
    const prefix = uniquePrefix()
    // A ttl twenty renewals long: only a stall of the test process of nearly 2 s could let a live
    // instance's lease lapse (a loaded CI machine stalls for hundreds of milliseconds at times).
    const instance = () => RateLimits.layerWith({ leaseTtlMs: 2_000, renewEveryMs: 100 }).pipe(
      Layer.provideMerge(Coordination.layerRedis(redisUrl!, { prefix }))
    )
    const keyId = newId("key")
    const tryAdmit = Effect.gen(function*() {
      return yield* Effect.result((yield* RateLimits).admit({ keyId, plan: plan({ concurrency: 1 }), tokens: 1 }))
    })
    const leaseTtl = Effect.promise(async () => {
      const redis = new Redis(redisUrl!)
      try {
        return await redis.pttl(`${prefix}rl:{${keyId}}:leases`)
      } finally {
        redis.disconnect()
      }
    })
    return Effect.gen(function*() {
      yield* Effect.gen(function*() {
        expect((yield* tryAdmit)._tag).toBe("Success")
        yield* Effect.sleep(2_500) // past the ttl: instance A keeps renewing
        expect((yield* tryAdmit.pipe(Effect.provide(instance())))._tag).toBe("Failure")
        // The leases' key carries an expiry of at most the lease's ttl (A renews it).
        const ttl = yield* leaseTtl
        expect(ttl).toBeGreaterThan(0)
        expect(ttl).toBeLessThanOrEqual(2_000)
      }).pipe(Effect.provide(instance())) // A stops here without releasing: it "dies"
      // The key itself lapses in Redis, with nobody asking again (read until gone, at most 10 s:
      // a slow machine may take longer than the ttl just to get here).
      const gone = yield* untilSuccess(leaseTtl.pipe(Effect.map((ms) => ({ _tag: ms === -2 ? "Success" : "Pending" }))))
      expect(gone._tag).toBe("Success")
      // A's lease lapsed with it (2 s after its last renewal): a new instance is admitted.
      expect((yield* tryAdmit.pipe(Effect.provide(instance())))._tag).toBe("Success")
    }).pipe(Effect.ensuring(dropPrefix(redisUrl!, prefix)))
  }, 20_000)
})
