/**
 * A run step re-run after a lost lease is charged to the key once. Two instances on PostgreSQL +
 * Redis: A is frozen (SIGSTOP) while its step streams, B takes the lease over and re-runs the step
 * under the same node id, then A thaws and its call ends (charged what it delivered). The key's
 * usage ledger must hold one entry for the step, and the live allowance must agree with the ledger.
 * And the other way round: a graceful stop mid-step closes its call with a `node.retry`, so the
 * step's next call is metered as the new call it is.
 */
import { execFileSync } from "node:child_process"
import { rmSync } from "node:fs"
import { afterAll, describe, inject, it } from "vitest"
import { embeddedDataDir } from "../support/engines.ts"
import { fastConfigEnv } from "../support/fast-config.ts"
import { type GatewayProcess, startGateway } from "../support/gateway-process.ts"
import { startInProcessGateway } from "../support/in-process-gateway.ts"
import { type TwoInstances, twoInstances } from "../support/two-instances.ts"
import { client } from "./support.ts"

const { postgresUrl, redisUrl } = inject("services")

// The two suites are independent (their own data dirs and databases) and mostly wait on slow
// steps and leases: they run side by side.
describe.concurrent("a graceful stop in the middle of a step (embedded)", () => {
  const dir = embeddedDataDir()
  afterAll(() => rmSync(dir, { recursive: true, force: true }))

  it("closes the call with node.retry (retry 0) before letting the lease go; the next call is charged as its own", { concurrent: false, timeout: 150_000 }, async ({ expect }) => {
    // a very slow step (5 tokens/s) and a short HTTP grace: the stop lands in the middle of the step
    const env = {
      GATEWAY_DATA_DIR: dir,
      ...slowEnv(dir),
      ...fastConfigEnv(dir, (config) => {
        for (const p of config.models.find((m: any) => m.id === "svc-pico-1").placements) p.simulator = { ttftMs: 1_000, tokensPerSecond: 5 }
      }),
      GATEWAY_SHUTDOWN_GRACE_MS: "300"
    }
    const first = await startGateway(env)
    const runs = client(first.baseUrl, first.apiKey!)
    const run = (await runs.create({ model: "pico", input: "tell me a long story" })).body.run
    await runs.events(run.id, { until: (frames) => frames.some((f) => f.event === "node.started") })
    // The stopped call must have delivered tokens (else it is released, not charged): the first
    // comes after 1 s, then 5 a second; the step's 42 tokens take ~9 s, so the stop still lands
    // mid-step. The call's first chunk is seen in /metrics (its time to first token); a little
    // more, and it has produced text. (A fixed 3 s wait once stopped before the first token on a
    // loaded machine: a clean-clone CI run, 2026-11-27.)
    const firstTokens = async () => {
      const text = await (await first.admin("GET", "/metrics")).text()
      return Number(/gateway_time_to_first_token_seconds_count\{[^}]*svc-pico-1[^}]*\} (\d+)/.exec(text)?.[1] ?? 0)
    }
    await expect.poll(firstTokens, { timeout: 20_000 }).toBeGreaterThanOrEqual(1)
    await new Promise((r) => setTimeout(r, 800))
    expect(await first.stop()).toBe(0)
    // The re-run needs no slow model (the stop is over): pico answers at full speed, so the story
    // is not told again at 5 tokens/s. Nor a short lease: the stop released the run's, so it is
    // claimed at once, and a 2 s lease here lapsed in two clean-clone CI runs (a heartbeat late
    // on the loaded machine), which resumed the run a second time.
    const second = await startInProcessGateway({ ...env, ...fastConfigEnv(dir), GATEWAY_RUN_LEASE_MS: "15000" }) // the restarted instance: its process is not the subject
    try {
      const again = client(second.baseUrl, first.apiKey!)
      const done = await again.waitFor(run.id, (r) => r.status === "completed", 40_000)
      const events = (await again.events(run.id)).events
      expect(events.map((e) => e.type)).toEqual(["node.started", "node.retry", "run.resumed", "node.completed", "outcome"])
      expect(events[1]).toMatchObject({ nodeId: events[0].nodeId, retry: 0, delayMs: 0, error: { type: "api_error" } })
      const picoUsage = async () =>
        ((await (await second.admin("GET", "/admin/v1/usage")).json()) as { data: Array<{ model: string; requests: number; costUsd: string }> })
          .data.find((m) => m.model === "svc-pico-1")
      // the stopped call (what it delivered) and the re-run: two calls, both charged, to the key
      // and to the run alike (the re-run's ledger row is written within a second of its end)
      await expect.poll(async () => (await picoUsage())?.requests ?? 0).toBeGreaterThanOrEqual(2)
      const pico = (await picoUsage())!
      expect(pico.requests).toBe(2)
      expect(Math.round(Number(pico.costUsd) * 1e6)).toBe(Math.round(done.usage.costUsd * 1e6))
      expect(Math.round(done.usage.costUsd * 1e6)).toBeGreaterThanOrEqual(Math.round(events[3].costUsd * 1e6))
    } finally {
      await second.stop()
    }
  })
})

/** The key's ledger rows and its budget's keys on Redis, for a failure's message. */
const explain = (pair: TwoInstances, keyId: string) => {
  try {
    return explained(pair, keyId)
  } catch (error) {
    return `(could not read the ledger or the store: ${String(error)})`
  }
}
const explained = (pair: TwoInstances, keyId: string) => {
  const sql = `SELECT request_id, model, input_tokens, output_tokens, cost_micros, at FROM usage_ledger WHERE key_id = '${keyId}' ORDER BY at`
  const rows = execFileSync("psql", [pair.databaseUrl, "-Atc", sql], { encoding: "utf8" })
  const redis = (...args: Array<string>) => execFileSync("redis-cli", ["-u", redisUrl!, ...args], { encoding: "utf8" })
  const keys = redis("--scan", "--pattern", `${pair.redisPrefix}*${keyId}*`).split("\n").filter(Boolean)
  const held = keys.map((key) => `${key} (${redis("TYPE", key).trim()}): ${redis("TYPE", key).trim() === "hash" ? redis("HGETALL", key).split("\n").join(" ") : redis("ZRANGE", key, "0", "-1", "WITHSCORES").split("\n").join(" ")}`)
  return `ledger rows:\n${rows}\nstore:\n${held.join("\n")}\nA's output:\n${pair.a.output().slice(-4000)}\nB's output:\n${pair.b.output().slice(-4000)}`
}

/** pico answers slowly (~1 s to the first token, then ~25 tokens/s): a step streams for seconds. */
const slowEnv = (dir: string) => ({
  ...fastConfigEnv(dir, (config) => {
    for (const p of config.models.find((m: any) => m.id === "svc-pico-1").placements) p.simulator = { ttftMs: 1_000, tokensPerSecond: 25 }
  }),
  GATEWAY_RUN_LEASE_MS: "2000"
})

describe.runIf(postgresUrl !== null && redisUrl !== null).concurrent("a step re-run after a lost lease (PostgreSQL + Redis)", () => {
  const pair = twoInstances({ postgresUrl: postgresUrl!, redisUrl: redisUrl! }, "charges", slowEnv)

  it("charges the key once for the step, in the ledger and in the live allowance", { concurrent: false, timeout: 120_000 }, async ({ expect }) => {
    const { a, b } = pair
    const created = (await (await a.admin("POST", "/admin/v1/keys", { name: "charged once", plan: "pro" })).json()) as { id: string; key: string }
    const onA = client(a.baseUrl, created.key)
    const onB = client(b.baseUrl, created.key)
    const run = (await onA.create({ model: "pico", input: "tell me a long story" })).body.run
    await onB.events(run.id, { until: (frames) => frames.some((f) => f.event === "node.started") })
    await new Promise((r) => setTimeout(r, 1_600)) // A's call is streaming: it has delivered tokens
    a.child.kill("SIGSTOP")
    try {
      await onB.events(run.id, { until: (frames) => frames.some((f) => f.event === "run.resumed"), timeoutMs: 20_000 })
    } finally {
      a.child.kill("SIGCONT")
    }
    const done = await onB.waitFor(run.id, (r) => r.status === "completed", 40_000)
    expect(done.attempt).toBe(2)
    const events = (await onB.events(run.id)).events
    expect(events.filter((e) => e.type === "node.started").length).toBe(1)
    expect(events.filter((e) => e.type === "node.completed").length).toBe(1)

    // A's interrupted call has ended (settled) and its ledger buffer is flushed by the summary
    await new Promise((r) => setTimeout(r, 3_000))
    const usage = async (gw: GatewayProcess) =>
      (await (await gw.admin("GET", `/admin/v1/usage?keyId=${created.id}`)).json()) as { data: Array<{ model: string; requests: number }>; totalCostUsd: number | string }
    await usage(a)
    const ledger = await usage(b)
    expect(ledger.data).toEqual([expect.objectContaining({ model: "svc-pico-1", requests: 1 })])
    // The run reports what its key was charged for the step, whichever attempt's settle charged it
    // and whichever attempt's record the run kept (A's and B's calls delivered different amounts).
    const reported = (await onB.get(run.id)).body.run.usage.costUsd as number
    expect(Math.round(reported * 1e6), explain(pair, created.id)).toBe(Math.round(Number(ledger.totalCostUsd) * 1e6))

    // the live allowance counts what the ledger counts: a non-streaming call's header, after its
    // settle, is the cap minus everything settled on the key
    const chat = await fetch(`${b.baseUrl}/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${created.key}`, "content-type": "application/json" },
      body: JSON.stringify({ model: "svc-nova-mini", max_tokens: 16, messages: [{ role: "user", content: "hi" }] })
    })
    expect(chat.status).toBe(200)
    const remaining = Number(chat.headers.get("xsvc-allowance-remaining"))
    // On Redis the answer goes out before its settle lands and its ledger row is recorded (both
    // off the request's path): wait for the row, as a client of the usage report would.
    await expect.poll(async () => (await usage(b)).data.find((m) => m.model === "svc-nova-mini")?.requests ?? 0, { timeout: 10_000 }).toBe(1)
    const after = await usage(b)
    expect(after.data.find((m) => m.model === "svc-pico-1")!.requests).toBe(1)
    // both are whole micro-dollars: they must agree exactly (a failure says what each side held)
    expect(Math.round((100 - remaining) * 1e6), explain(pair, created.id)).toBe(Math.round(Number(after.totalCostUsd) * 1e6))
  })
})
