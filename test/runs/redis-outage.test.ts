/**
 * A transient Redis outage must not end runs: runs created while the gateway's Redis (a private
 * redis-server of this test, never the shared one) is down cannot reserve their allowance (a
 * retryable 503), so their step backs off and retries — each retry a `node.retry` event in the
 * log — and once Redis is back, every run completes. On every engine.
 */
import { randomBytes } from "node:crypto"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { engines, inOrder } from "../support/engines.ts"
import { fastConfigEnv } from "../support/fast-config.ts"
import type { GatewayHandle } from "../support/gateway-process.ts"
import { startInProcessGateway } from "../support/in-process-gateway.ts"
import { type PrivateRedis, startPrivateRedis } from "../support/private-redis.ts"
import { checkLog, client, type RunsClient } from "./support.ts"

describe.concurrent.each(engines())("runs through a Redis outage ($name)", (engine) => {
  let gw: GatewayHandle
  let redis: PrivateRedis
  let cleanup: () => Promise<void>
  let runs: RunsClient
  beforeAll(async () => {
    redis = await startPrivateRedis()
    const setup = await engine.setup()
    cleanup = setup.cleanup
    gw = await startInProcessGateway({
      ...setup.env,
      ...fastConfigEnv(setup.env.GATEWAY_DATA_DIR!),
      REDIS_URL: redis.url,
      GATEWAY_REDIS_PREFIX: `gw-outage-${randomBytes(4).toString("hex")}:`,
      GATEWAY_RUN_RETRY_BASE_MS: "200"
    })
    runs = client(gw.baseUrl, gw.apiKey!)
  })
  afterAll(async () => {
    await gw?.stop()
    await redis?.stop()
    await cleanup?.()
  })

  it("runs created while Redis is down retry their step and complete once it is back", { ...inOrder, timeout: 120_000 }, async () => {
    // one run before the outage: the store is seeded and working
    const before = (await runs.create({ model: "pico", input: "hello" })).body.run
    expect((await runs.waitFor(before.id, (r) => r.status !== "running")).status).toBe("completed")

    await redis.stop()
    const created = await Promise.all(Array.from({ length: 8 }, (_, i) => runs.create({ model: "pico", input: `hello ${i}` })))
    expect(created.every((c) => c.status === 202)).toBe(true)
    const ids = created.map((c) => c.body.run.id as string)
    // every run is retrying, none has ended
    for (const id of ids) {
      const sse = await runs.events(id, { until: (frames) => frames.filter((f) => f.event === "node.retry").length >= 2, timeoutMs: 20_000 })
      const retries = sse.events.filter((e) => e.type === "node.retry")
      expect(retries.length).toBe(2)
      expect(retries[0]).toMatchObject({ retry: 1, error: { type: "api_error" } })
      expect(retries[0].error.message).toContain("allowance")
      expect(retries[1].delayMs).toBeGreaterThan(retries[0].delayMs * 1.2)
      expect((await runs.get(id)).body.run.status).toBe("running")
    }

    await redis.start()
    for (const id of ids) {
      const done = await runs.waitFor(id, (r) => r.status !== "running", 60_000)
      expect(done.outcome).toMatchObject({ status: "completed" })
      const events = (await runs.events(id)).events
      expect(checkLog(events)).toEqual({ gapFree: true, outcomes: 1, outcomeLast: true })
      expect(events.filter((e) => e.type === "node.started").length).toBe(1)
      expect(events.filter((e) => e.type === "node.completed").length).toBe(1)
      expect(events.filter((e) => e.type === "node.retry").length).toBeGreaterThanOrEqual(2)
    }
  })
})
