/**
 * `/healthz` and `/readyz` on the real gateway: no credentials, never metered; readiness asks the
 * database and Redis for real, and names what is unreachable. Outages are made for real: a private
 * `redis-server` is killed, and PostgreSQL is reached through a TCP proxy in this process that is
 * then shut.
 */
import { afterAll, describe, expect, inject, it } from "vitest"
import { engines, freshDataDir, migratedPostgresDatabase } from "../support/engines.ts"
import { startPrivateRedis } from "../support/private-redis.ts"
import type { GatewayHandle } from "../support/gateway-process.ts"
import { startInProcessGateway } from "../support/in-process-gateway.ts"
import { type PostgresProxy, startPostgresProxy } from "../support/postgres-proxy.ts"

const get = async (gw: GatewayHandle, path: string) => {
  const res = await fetch(`${gw.baseUrl}${path}`)
  return { status: res.status, headers: res.headers, body: (await res.json()) as Record<string, any> }
}

describe.each(engines())("health probes ($name)", (engine) => {
  const started: Array<{ gw: GatewayHandle; cleanup: () => void }> = []
  afterAll(async () => {
    for (const { gw, cleanup } of started) {
      await gw.stop()
      await cleanup()
    }
  })

  it("answers /healthz and /readyz without credentials, uncached, and draws no usage", async () => {
    const setup = await engine.setup()
    const gw = await startInProcessGateway(setup.env)
    started.push({ gw, cleanup: setup.cleanup })
    const health = await get(gw, "/healthz")
    expect(health).toMatchObject({ status: 200, body: { status: "ok" } })
    expect(health.headers.get("cache-control")).toBe("no-store")
    const ready = await get(gw, "/readyz")
    expect(ready).toMatchObject({ status: 200, body: { status: "ready", checks: { database: { status: "ok", latencyMs: expect.any(Number) } } } })
    expect(ready.body.checks.redis).toBeUndefined() // no Redis configured
    expect((await fetch(`${gw.baseUrl}/readyz`, { method: "POST" })).status).toBe(405)
    const usage = (await (await gw.admin("GET", "/admin/v1/usage")).json()) as { data: Array<unknown> }
    expect(usage.data).toEqual([])
  })
})

describe("readiness names what is unreachable", () => {
  const services = inject("services")
  const cleanups: Array<() => void | Promise<unknown>> = []
  afterAll(async () => {
    for (const cleanup of cleanups.reverse()) await cleanup()
  })

  it("503 naming redis when Redis is down, and both when the database is down too", async () => {
    const redis = await startPrivateRedis()
    cleanups.push(() => redis.stop())
    const dataDir = freshDataDir()
    let env: Record<string, string> = { GATEWAY_DATA_DIR: dataDir, REDIS_URL: redis.url, GATEWAY_REDIS_PREFIX: `gw-health-${process.pid}:` }
    let proxy: PostgresProxy | undefined
    if (services.postgresUrl !== null) {
      const db = await migratedPostgresDatabase(services.postgresUrl)
      cleanups.push(db.drop)
      proxy = await startPostgresProxy(new URL(db.url))
      env = { ...env, DATABASE_URL: proxy.through(db.url) }
    }
    const gw = await startInProcessGateway(env)
    cleanups.push(() => gw.stop())

    const ready = await get(gw, "/readyz")
    expect(ready).toMatchObject({ status: 200, body: { status: "ready", checks: { database: { status: "ok" }, redis: { status: "ok" } } } })

    await redis.stop()
    const noRedis = await get(gw, "/readyz")
    expect(noRedis.status).toBe(503)
    expect(noRedis.headers.get("retry-after")).toBe("1")
    expect(noRedis.body).toMatchObject({
      status: "not_ready",
      error: { type: "api_error", message: "Not ready: redis is unreachable" },
      checks: { database: { status: "ok" }, redis: { status: "unreachable", error: expect.stringMatching(/^redis: /) } }
    })
    expect((await get(gw, "/healthz")).status).toBe(200) // the process itself is fine

    if (proxy !== undefined) {
      proxy.shut()
      const neither = await get(gw, "/readyz")
      expect(neither.status).toBe(503)
      expect(neither.body).toMatchObject({
        error: { message: "Not ready: database and redis are unreachable" },
        checks: { database: { status: "unreachable", error: expect.stringMatching(/^database: /) } }
      })
    }
  }, 90_000)
})
