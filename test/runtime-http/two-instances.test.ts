/**
 * Two gateway processes on one PostgreSQL and one Redis. An upstream in this test process counts
 * the calls in flight, so "a placement's concurrency never exceeds its capacity across both" is
 * measured outside the gateways, not by what they report. The allowance, shared through Redis,
 * never overshoots while both instances spend it at once.
 */
import { randomBytes } from "node:crypto"
import { execFileSync } from "node:child_process"
import { rmSync } from "node:fs"
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest"
import { openAiLike, startFakeUpstream, type FakeUpstream } from "../backends/openai-compatible/fake-upstream.ts"
import { freshDataDir, freshPostgresDatabase } from "../support/engines.ts"
import { fastConfigEnv } from "../support/fast-config.ts"
import type { GatewayHandle } from "../support/gateway-process.ts"
import { startInProcessGateway } from "../support/in-process-gateway.ts"
import { dropPrefix } from "../coordination/support.ts"
import { Effect } from "effect"
import { post } from "./support.ts"

const { postgresUrl, redisUrl } = inject("services")

describe.runIf(postgresUrl !== null && redisUrl !== null)("two gateway instances on PostgreSQL + Redis", () => {
  let upstream: FakeUpstream
  let a: GatewayHandle
  let b: GatewayHandle
  let db: { url: string; drop(): void }
  const dirs = [freshDataDir(), freshDataDir()]
  const prefix = `gwtest:${randomBytes(5).toString("hex")}:`
  let inFlight = 0
  let maxInFlight = 0
  let served = 0

  beforeAll(async () => {
    upstream = await startFakeUpstream()
    upstream.handler = async (req, res, body) => {
      inFlight++
      maxInFlight = Math.max(maxInFlight, inFlight)
      try {
        await new Promise((r) => setTimeout(r, 80))
        await openAiLike(req, res, body)
        served++
      } finally {
        inFlight--
      }
    }
    db = await freshPostgresDatabase(postgresUrl!)
    const mutate = (config: any) => {
      const pico = config.models.find((m: { id: string }) => m.id === "svc-pico-1")
      pico.placements = [{ id: "pico-up", backend: "openai-compatible", capacity: 2, baseUrl: `${upstream.url}/v1`, upstreamModel: "upstream-pico" }]
      pico.equivalents = []
      config.plans.tiny = { allowanceUsd: 0.005, rpm: 100_000, tpm: 100_000_000, concurrency: 100 }
    }
    const env = (dir: string) => ({
      GATEWAY_DATA_DIR: dir,
      DATABASE_URL: db.url,
      REDIS_URL: redisUrl!,
      GATEWAY_REDIS_PREFIX: prefix,
      GATEWAY_ADMIN_TOKEN: "two-instances-admin",
      ...fastConfigEnv(dir, mutate)
    })
    // Started together (the migrator locks its table); the one that made the first key is A.
    ;[a, b] = await Promise.all([startInProcessGateway(env(dirs[0])), startInProcessGateway(env(dirs[1]))])
    if (a.apiKey === undefined) [a, b] = [b, a]
  }, 120_000)

  afterAll(async () => {
    await Promise.all([a?.stop(), b?.stop()])
    await upstream?.close()
    await db?.drop()
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true })
    await Effect.runPromise(dropPrefix(redisUrl!, prefix))
  })

  const ask = (gw: GatewayHandle, key: string, i: number, maxTokens = 50) =>
    post(gw, "/v1/chat/completions", key, { model: "svc-pico-1", max_tokens: maxTokens, messages: [{ role: "user", content: `say exactly: reply ${i}` }] })

  it("never runs more calls on a placement than its capacity, across both instances; nobody gets a 429", async () => {
    const key = a.apiKey!
    const responses = await Promise.all(Array.from({ length: 20 }, (_, i) => ask(i % 2 === 0 ? a : b, key, i)))
    expect(responses.map((r) => r.status)).toEqual(Array(20).fill(200))
    const answers = await Promise.all(responses.map(async (r) => ((await r.json()) as { choices: Array<{ message: { content: string } }> }).choices[0].message.content))
    expect(answers).toEqual(Array.from({ length: 20 }, (_, i) => `reply ${i}`))
    expect(served).toBe(20)
    expect(maxInFlight).toBe(2) // the capacity was used, and never exceeded
    // Both instances see the same, idle, global queue. A slot's release is sent beside the answer,
    // not awaited before it (one round trip less), so the last one may land a moment after the
    // client has its answer: wait for it (a leaked slot would stay in use until its lease lapses).
    for (const gw of [a, b]) {
      const pico = async () =>
        ((await (await gw.admin("GET", "/admin/v1/queues")).json()) as { data: Array<{ placementId: string; inUse: number; capacity: number }> }).data
          .find((q) => q.placementId === "pico-up")
      await expect.poll(pico, { timeout: 5_000 }).toMatchObject({ capacity: 2, inUse: 0 })
    }
  })

  it("never lets two instances together spend past one allowance", async () => {
    const created = await a.admin("POST", "/admin/v1/keys", { plan: "tiny" })
    const { id, key } = (await created.json()) as { id: string; key: string }
    // Each call reserves its worst case (4,000 output tokens ≈ $0.0008), so only a few fit at once.
    const responses = await Promise.all(Array.from({ length: 30 }, (_, i) => ask(i % 2 === 0 ? a : b, key, i, 4_000)))
    const statuses = responses.map((r) => r.status)
    expect(statuses.filter((s) => s === 429).length).toBeGreaterThan(0)
    expect(statuses.filter((s) => s === 200).length).toBeGreaterThan(0)
    const refused = responses.find((r) => r.status === 429)!
    expect(((await refused.json()) as { error: { type: string } }).error.type).toBe("allowance_exhausted")
    // Each instance flushes its own ledger (at the latest when it stops); read the totals in SQL
    // once both have written theirs.
    expect(await Promise.all([a.stop(), b.stop()])).toEqual([0, 0])
    const out = execFileSync("psql", [db.url, "-tAc", `SELECT count(*), coalesce(sum(cost_micros), 0) FROM usage_ledger WHERE key_id = '${id}'`]).toString().trim()
    const [requests, micros] = out.split("|").map(Number)
    expect(requests).toBe(statuses.filter((s) => s === 200).length)
    expect(micros).toBeLessThanOrEqual(5_000)
  }, 90_000)
})
