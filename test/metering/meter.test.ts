/** The Meter façade as the request path will use it, over the real services on both stores. */
import { describe, expect, layer } from "@effect/vitest"
import { Redis } from "ioredis"
import { afterAll, beforeAll, inject } from "vitest"
import { Context, Effect, Layer, Schedule } from "effect"
import { ConfigFile } from "../../src/config/config-file.ts"
import { defaultConfig } from "../../src/config/default-config.ts"
import type { GatewayConfig } from "../../src/config/schema.ts"
import { Coordination } from "../../src/coordination/coordination.ts"
import type { KeyRecord } from "../../src/keys/keys-repo.ts"
import { allPermissions } from "../../src/keys/permissions.ts"
import { newId } from "../../src/util/ids.ts"
import { Allowance } from "../../src/metering/allowance.ts"
import { Meter } from "../../src/metering/meter.ts"
import { RateLimits } from "../../src/metering/rate-limits.ts"
import { UsageLedger } from "../../src/metering/usage-ledger.ts"
import { makeTelemetry, Telemetry } from "../../src/observability/telemetry.ts"
import { makeUsage } from "../../src/model/usage.ts"
import { redisLayer, uniquePrefix } from "../coordination/support.ts"
import { type PrivateRedis, startPrivateRedis } from "../support/private-redis.ts"
import { formatUsd } from "../../src/model/money.ts"
import { embeddedDatabasePerFile, storeKinds } from "./support.ts"

const config: GatewayConfig = {
  ...defaultConfig,
  plans: { ...defaultConfig.plans, single: { allowanceUsd: 1, rpm: 1_000, tpm: 10_000_000, concurrency: 1 } }
}
const chat = (id: string) => defaultConfig.models.find((m) => m.id === id)!
const atlas = chat("svc-atlas-1")
const pico = chat("svc-pico-1")
const keyOn = (plan: string): KeyRecord =>
  ({ id: newId("key"), name: null, hint: "svc_…", plan, permissions: allPermissions, createdAt: new Date(), revokedAt: null })

const services = (store: Layer.Layer<Coordination>) => Meter.layer.pipe(
  Layer.provideMerge(Layer.mergeAll(Allowance.layer, RateLimits.layer)),
  Layer.provideMerge(UsageLedger.layerWith({ flushIntervalMs: 3_600_000 })),
  Layer.provideMerge(store),
  Layer.provideMerge(ConfigFile.layerWith(config))
)

/**
 * Two instances on one store and one database, each with its own meter and ledger buffer (scoped);
 * their charge metrics go to one registry (`telemetry`).
 */
const twoInstances = (store: Layer.Layer<Coordination>, telemetry = makeTelemetry({ metrics: true, tracing: false, logLevel: "None" })) =>
  Effect.gen(function*() {
    const shared = yield* Layer.build(Layer.mergeAll(store, ConfigFile.layerWith(config), Layer.succeed(Telemetry, telemetry)))
    const instance = () =>
      Layer.build(Meter.layer.pipe(
        Layer.provideMerge(Layer.mergeAll(Allowance.layer, RateLimits.layer)),
        Layer.provideMerge(UsageLedger.layerWith({ flushIntervalMs: 3_600_000 })),
        Layer.provideMerge(Layer.succeedContext(shared))
      ))
    return [yield* instance(), yield* instance()] as const
  })

/** Every block's database (one per file: see `embeddedDatabasePerFile`). */
const database = embeddedDatabasePerFile()

for (const store of storeKinds()) {
  describe(`meter (${store.name})`, () => {
    layer(database.layer(), { timeout: "60 seconds", excludeTestServices: true })((it) => {
      it.effect("begin reserves the worst case and sends headers; settle charges the real cost and records it", () =>
        Effect.gen(function*() {
          const meter = yield* Meter
          const key = keyOn("free") // $5, 60 rpm, 1M tpm
          const call = yield* meter.begin({ key, model: atlas, inputTokens: 1_000, maxOutputTokens: 2_000 })
          expect(call.maxOutputTokens).toBe(2_000)
          expect(call.reservedMicros).toBe(3_000 + 30_000) // 1,000 × $3 + 2,000 × $15 per million
          expect(call.headers()).toEqual({
            "x-ratelimit-limit-requests": "60",
            "x-ratelimit-remaining-requests": "59",
            "x-ratelimit-reset-requests": "1s",
            "x-ratelimit-limit-tokens": "1000000",
            "x-ratelimit-remaining-tokens": "997000",
            "x-ratelimit-reset-tokens": "180ms",
            "xsvc-allowance-remaining": "4.967000"
          })
          const usage = makeUsage({ inputTokens: 1_000, outputTokens: 100 })
          const settled = yield* call.settle(usage)
          expect(settled).toMatchObject({ costMicros: 4_500, chargedMicros: 4_500 })
          expect(yield* settled.keyCharge).toBe(4_500)
          expect(yield* call.settle(usage)).toMatchObject({ costMicros: 4_500, chargedMicros: 4_500 }) // once only
          expect(call.headers()["xsvc-allowance-remaining"]).toBe("4.995500")
          const ledger = yield* UsageLedger
          const now = Date.now()
          // On a remote store the settle lands (and the ledger records it) off the caller's path.
          const summary = yield* ledger.summary({ keyId: key.id, from: new Date(now - 60_000), to: new Date(now + 60_000) }).pipe(
            Effect.repeat({ until: (rows) => rows.length > 0, schedule: Schedule.spaced("10 millis") }),
            Effect.timeout("5 seconds")
          )
          expect(summary).toEqual([{ model: "svc-atlas-1", requests: 1, inputTokens: 1_000, outputTokens: 100, cachedInputTokens: 0, reasoningTokens: 0, costMicros: 4_500 }])
        }).pipe(Effect.provide(services(store.layer()))))

      it.effect("without a request ceiling: the model's maxOutput, else the documented default", () =>
        Effect.gen(function*() {
          const meter = yield* Meter
          const key = keyOn("pro")
          const a = yield* meter.begin({ key, model: atlas, inputTokens: 10 })
          expect(a.maxOutputTokens).toBe(32_000)
          const p = yield* meter.begin({ key, model: pico, inputTokens: 10 })
          expect(p.maxOutputTokens).toBe(4_096)
          yield* a.fail()
          yield* p.fail()
        }).pipe(Effect.provide(services(store.layer()))))

      it.effect("fail returns the reservation and the slot; an allowance refusal frees the slot too", () =>
        Effect.gen(function*() {
          const meter = yield* Meter
          const key = keyOn("single") // $1, one call at a time
          const big = yield* meter.begin({ key, model: atlas, inputTokens: 100_000, maxOutputTokens: 30_000 })
          expect(big.headers()["xsvc-allowance-remaining"]).toBe("0.250000")
          expect(yield* Effect.flip(meter.begin({ key, model: pico, inputTokens: 1 }))).toMatchObject({ kind: "rate_limit_error" })
          yield* big.fail()
          yield* big.settle(makeUsage({ outputTokens: 1_000 })) // after fail: no charge
          expect(big.headers()["xsvc-allowance-remaining"]).toBe("1.000000")
          // Too expensive for the allowance: refused, and the concurrency slot is not kept.
          const refused = yield* Effect.flip(meter.begin({ key, model: atlas, inputTokens: 400_000, maxOutputTokens: 32_000 }))
          expect(refused).toMatchObject({ _tag: "LimitExceeded", kind: "allowance_exhausted" })
          const small = yield* meter.begin({ key, model: pico, inputTokens: 1, maxOutputTokens: 1 })
          yield* small.settle(makeUsage({ inputTokens: 1, outputTokens: 1 }))
        }).pipe(Effect.provide(services(store.layer()))))

      it.effect("beginScoped fails a call its scope closes on (interrupted requests leak nothing)", () =>
        Effect.gen(function*() {
          const meter = yield* Meter
          const key = keyOn("single")
          yield* Effect.scoped(Effect.asVoid(meter.beginScoped({ key, model: atlas, inputTokens: 100_000, maxOutputTokens: 30_000 })))
          const next = yield* meter.begin({ key, model: atlas, inputTokens: 100_000, maxOutputTokens: 30_000 })
          expect(next.headers()["xsvc-allowance-remaining"]).toBe("0.250000")
          yield* next.fail()
        }).pipe(Effect.provide(services(store.layer()))))

      it.effect("a call settled twice under one request id (a run step re-run on another instance) is charged and recorded once, at the first settle's usage", () =>
        Effect.gen(function*() {
          const telemetry = makeTelemetry({ metrics: true, tracing: false, logLevel: "None" })
          const [a, b] = yield* twoInstances(store.layer(), telemetry)
          const key = keyOn("pro")
          const requestId = newId("call")
          const begin = { key, model: pico, inputTokens: 100, maxOutputTokens: 1_000, requestId }
          const onA = yield* Context.get(a, Meter).begin(begin)
          const onB = yield* Context.get(b, Meter).begin(begin)
          // A's call ends first, charged what it delivered; B's re-run ends later with more.
          const first = yield* onA.settle(makeUsage({ inputTokens: 100, outputTokens: 10 }))
          const second = yield* onB.settle(makeUsage({ inputTokens: 100, outputTokens: 500 }))
          expect(second.chargedMicros).toBeGreaterThan(first.chargedMicros)
          // Both report what the key bore for the id: the first settle's charge (a run step re-run
          // after a takeover reports that, whichever attempt it records).
          expect(yield* first.keyCharge).toBe(first.chargedMicros)
          expect(yield* second.keyCharge).toBe(first.chargedMicros)
          // Both holds are back (on Redis the settles land off the callers' path)…
          const plan = config.plans.pro
          const allowance = Context.get(b, Allowance)
          const remaining = yield* allowance.remaining(key.id, plan).pipe(
            Effect.repeat({ until: (left) => left === plan.allowanceUsd * 1e6 - first.chargedMicros, schedule: Schedule.spaced("10 millis") }),
            Effect.timeout("5 seconds")
          )
          expect(remaining).toBe(plan.allowanceUsd * 1e6 - first.chargedMicros)
          // …and what follows them in their fibers has run. (A wait that cannot fail the test: with
          // the fix nothing else is recorded; without it, it lets the loser's row be recorded.)
          yield* Effect.sleep("50 millis")
          // The loser's row would reach SQL first (its instance flushes first): it has none.
          yield* Context.get(b, UsageLedger).flush()
          yield* Context.get(a, UsageLedger).flush()
          const now = Date.now()
          const summary = yield* Context.get(a, UsageLedger).summary({ keyId: key.id, from: new Date(now - 60_000), to: new Date(now + 60_000) })
          expect(summary).toEqual([expect.objectContaining({ model: "svc-pico-1", requests: 1, outputTokens: 10, costMicros: first.chargedMicros })])
          // The charge metrics count what was charged, once.
          const scraped = telemetry.metrics!.scrape({})
          expect(/gateway_tokens_total\{[^}]*type="output"[^}]*\} (\d+)/.exec(scraped)?.[1]).toBe("10")
        }).pipe(Effect.scoped))

      it.effect("a call under a request id that ended without output (released) leaves the charge to the call that delivered", () =>
        Effect.gen(function*() {
          const [a, b] = yield* twoInstances(store.layer())
          const key = keyOn("pro")
          const begin = { key, model: pico, inputTokens: 100, maxOutputTokens: 1_000, requestId: newId("call") }
          const onA = yield* Context.get(a, Meter).begin(begin)
          const onB = yield* Context.get(b, Meter).begin(begin)
          yield* onA.fail() // the stalled owner's call ends with nothing delivered
          const charged = yield* onB.settle(makeUsage({ inputTokens: 100, outputTokens: 500 }))
          const plan = config.plans.pro
          const expected = plan.allowanceUsd * 1e6 - charged.chargedMicros
          const remaining = yield* Context.get(a, Allowance).remaining(key.id, plan).pipe(
            Effect.repeat({ until: (left) => left === expected, schedule: Schedule.spaced("10 millis") }),
            Effect.timeout("5 seconds")
          )
          expect(remaining).toBe(expected)
          const now = Date.now()
          const summary = yield* Context.get(b, UsageLedger).summary({ keyId: key.id, from: new Date(now - 60_000), to: new Date(now + 60_000) }).pipe(
            Effect.repeat({ until: (rows) => rows.length > 0, schedule: Schedule.spaced("10 millis") }),
            Effect.timeout("5 seconds")
          )
          expect(summary).toEqual([expect.objectContaining({ requests: 1, outputTokens: 500, costMicros: charged.chargedMicros })])
        }).pipe(Effect.scoped))

      it.effect("an unknown plan name meters on the default plan", () =>
        Effect.gen(function*() {
          expect((yield* Meter).planOf(keyOn("gone"))).toEqual(config.plans.free)
        }).pipe(Effect.provide(services(store.layer()))))
    })
  })
}

describe("meter when the store is unreachable", () => {
  layer(database.layer(), { timeout: "60 seconds", excludeTestServices: true })((it) => {
    it.effect("fails closed with a retryable 503: no allowance check, no call", () =>
      Effect.gen(function*() {
        const failure = yield* Effect.flip((yield* Meter).begin({ key: keyOn("free"), model: pico, inputTokens: 1 }))
        expect(failure).toMatchObject({ _tag: "ServiceUnavailable", status: 503, retryAfterSeconds: 1 })
      }).pipe(Effect.provide(services(Coordination.layerRedis("redis://127.0.0.1:1", { connectTimeoutMs: 200, prefix: uniquePrefix() })))))
  })
})

/**
 * Blocks the Redis at `url` for `ms` with a busy script of its own connection (commands of other
 * connections wait behind it, as behind a stalled server). Resolves once the script is running (a
 * PING from a third connection goes unanswered), with the promise of its end.
 */
const stallRedis = async (url: string, ms: number) => {
  const client = new Redis(url, { maxRetriesPerRequest: 0 })
  const probe = new Redis(url, { maxRetriesPerRequest: 0 })
  await Promise.all([client.ping(), probe.ping()]) // both connected: the script leaves at once
  const ended = client.eval(
    `local t = redis.call('TIME')
    local start = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
    while true do
      local n = redis.call('TIME')
      if tonumber(n[1]) * 1000 + math.floor(tonumber(n[2]) / 1000) - start >= tonumber(ARGV[1]) then return 1 end
    end`,
    0,
    String(ms)
  ).finally(() => {
    client.disconnect()
    probe.disconnect()
  })
  const answered = (ping: Promise<unknown>) => Promise.race([ping.then(() => true), new Promise<boolean>((r) => setTimeout(() => r(false), 100))])
  while (await answered(probe.ping())) { /* not running yet */ }
  return { ended }
}

// A Redis of its own: the stall would hold every other suite's commands too.
describe.skipIf(inject("services").redisUrl === null)("meter when Redis answers after the command timeout", () => {
  let redis: PrivateRedis | undefined
  beforeAll(async () => {
    redis = await startPrivateRedis()
  })
  afterAll(() => redis?.stop())

  layer(database.layer(), { timeout: "60 seconds", excludeTestServices: true })((it) => {
    it.effect("the admission that timed out (but ran) lets its lease and hold go: the retry's alone are counted", () =>
      Effect.gen(function*() {
        const meter = yield* Meter
        const key = keyOn("single") // $1, one call at a time: a leaked lease would refuse the retry
        yield* meter.begin({ key, model: pico, inputTokens: 10, maxOutputTokens: 10 }).pipe(Effect.flatMap((call) => call.fail())) // seeds the budget
        // The admission script reaches Redis behind a 2.5 s stall: its answer comes after the
        // client's 1 s command timeout, and then it runs. The meter takes its step-by-step path.
        const stalled = yield* Effect.promise(() => stallRedis(redis!.url, 2_500))
        const startedAt = Date.now()
        const call = yield* meter.begin({ key, model: pico, inputTokens: 100, maxOutputTokens: 1_000 })
        expect(Date.now() - startedAt, "the first answer timed out").toBeGreaterThanOrEqual(1_000)
        yield* Effect.promise(() => stalled.ended)
        const cap = config.plans.single.allowanceUsd * 1e6
        // One hold counted: the retry's.
        expect(yield* (yield* Allowance).remaining(key.id, config.plans.single)).toBe(cap - call.reservedMicros)
        const { chargedMicros } = yield* call.settle(makeUsage({ inputTokens: 100, outputTokens: 20 }))
        expect(call.headers()["xsvc-allowance-remaining"]).toBe(formatUsd(cap - chargedMicros))
        // And one lease: the next call (concurrency 1) is admitted.
        const next = yield* meter.begin({ key, model: pico, inputTokens: 10, maxOutputTokens: 10 })
        yield* next.fail()
      }).pipe(Effect.provide(services(redisLayer(redis!.url)))), 30_000)
  })
})
