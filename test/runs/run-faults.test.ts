/**
 * Runs under faults and edge cases, over real HTTP on every engine: a step whose model keeps
 * failing retries with `node.retry` events and then ends `failed` with the spec's error types;
 * `exact` pins the model under a faulted placement while `auto` fails over; a caller outcome with
 * a status outside the terminal four is refused; the event stream commits its headers at once; a
 * revoked key's live runs end `failed`/`key_revoked`; a run whose stored request no longer fits its
 * model (the config changed under it) ends with `execution_error`.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { engines, inOrder } from "../support/engines.ts"
import { fastConfigEnv } from "../support/fast-config.ts"
import type { GatewayHandle } from "../support/gateway-process.ts"
import { startInProcessGateway } from "../support/in-process-gateway.ts"
import { checkLog, client, type RunsClient } from "./support.ts"

const lookupTool = { name: "lookup", input_schema: { type: "object", properties: { q: { type: "string" } } } }
const PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII="

/** Fast retries everywhere: dispatcher backoff, circuit cooldown and the run's own step retries. */
const faultEnv = {
  GATEWAY_RETRY_BASE_MS: "20",
  GATEWAY_CIRCUIT_COOLDOWN_MS: "200",
  GATEWAY_RUN_STEP_RETRIES: "2",
  GATEWAY_RUN_RETRY_BASE_MS: "100"
  // The default run lease (15 s): nothing here waits for a lease to lapse (a stopped gateway lets
  // its leases go), and with 3 s a starved loop on a loaded VM can let a run's own lease lapse,
  // putting a \`run.resumed\` among events these tests list exactly (seen in runs.test.ts).
}

describe.concurrent.each(engines())("runs under faults ($name)", (engine) => {
  let gw: GatewayHandle
  let cleanup: () => Promise<void>
  let runs: RunsClient
  let env: Record<string, string>
  beforeAll(async () => {
    const setup = await engine.setup()
    cleanup = setup.cleanup
    env = { ...setup.env, ...fastConfigEnv(setup.env.GATEWAY_DATA_DIR!), ...faultEnv }
    gw = await startInProcessGateway(env)
    runs = client(gw.baseUrl, gw.apiKey!)
  })
  afterAll(async () => {
    await gw?.stop()
    await cleanup?.()
  })

  const fault = async (placement: string, body: unknown) => {
    const res = await gw.admin("POST", `/admin/v1/placements/${placement}/faults`, body)
    expect(res.status).toBe(200)
  }
  const finished = (id: string, timeoutMs = 30_000) =>
    runs.waitFor(id, (r) => r.status !== "running" && r.status !== "requires_action", timeoutMs)

  it("a model that refuses the request (non-retryable) ends the run failed/model_error with the spec's error type", inOrder, async () => {
    await fault("lyra-a", { mode: "error", status: 400 })
    try {
      const run = (await runs.create({ model: "lyra", input: "hello", optimization: { mode: "exact" } })).body.run
      const ended = await finished(run.id)
      expect(ended.outcome).toEqual({ status: "failed", reason: "model_error" })
      const events = (await runs.events(run.id)).events
      expect(events.map((e) => e.type)).toEqual(["node.started", "outcome"])
      expect(events[1].error.type).toBe("invalid_request_error")
      expect(events[1].error.message).toEqual(expect.any(String))
    } finally {
      await fault("lyra-a", { mode: "none" })
    }
  })

  it("a key out of prepaid credits: failed/model_error with credits_exhausted, not retried", inOrder, async () => {
    const prepaid = (await (await gw.admin("POST", "/admin/v1/keys", { name: "no credits", plan: "prepaid" })).json()) as { key: string }
    const broke = client(gw.baseUrl, prepaid.key)
    const run = (await broke.create({ model: "pico", input: "hello" })).body.run
    const ended = await broke.waitFor(run.id, (r) => r.status !== "running")
    expect(ended.outcome).toEqual({ status: "failed", reason: "model_error" })
    const events = (await broke.events(run.id)).events
    expect(events.map((e) => e.type)).toEqual(["node.started", "outcome"])
    expect(events[1].error.type).toBe("credits_exhausted")
    expect(ended.usage.costUsd).toBe(0)
  })

  it("exact pins the model under a faulted placement: retries with node.retry events, then failed/retries_exhausted (api_error); auto fails over", { ...inOrder, timeout: 90_000 }, async () => {
    await fault("lyra-a", { mode: "error", status: 500 })
    try {
      const pinned = (await runs.create({ model: "lyra", input: "hello", optimization: { mode: "exact" } })).body.run
      const ended = await finished(pinned.id, 60_000)
      expect(ended.outcome).toEqual({ status: "failed", reason: "retries_exhausted" })
      const events = (await runs.events(pinned.id)).events
      expect(checkLog(events)).toEqual({ gapFree: true, outcomes: 1, outcomeLast: true })
      expect(events.map((e) => e.type)).toEqual(["node.started", "node.retry", "node.retry", "outcome"])
      const nodeId = events[0].nodeId
      for (const [i, retry] of events.slice(1, 3).entries()) {
        expect(retry).toMatchObject({ nodeId, retry: i + 1, maxRetries: 2, error: { type: "api_error" } })
        expect(retry.delayMs).toBeGreaterThan(0)
      }
      expect(events[3].error.type).toBe("api_error")
      // never served by an equivalent: no step completed anywhere
      expect(events.some((e) => e.type === "node.completed")).toBe(false)

      const auto = (await runs.create({ model: "lyra", input: "hello" })).body.run
      const served = await finished(auto.id)
      expect(served.status).toBe("completed")
      const completed = (await runs.events(auto.id)).events.find((e) => e.type === "node.completed")
      expect(completed.model).toBe("svc-nova-mini")
    } finally {
      await fault("lyra-a", { mode: "none" })
    }
  })

  it("a step that fails once recovers on its retry; the retry is in the log and the run completes", { ...inOrder, timeout: 60_000 }, async () => {
    // the placement fails until the first node.retry is in the log, then heals (exact: no failover)
    await fault("lyra-a", { mode: "error", status: 503, rate: 1 })
    const run = (await runs.create({ model: "lyra", input: "hello", optimization: { mode: "exact" } })).body.run
    await runs.events(run.id, { until: (frames) => frames.some((f) => f.event === "node.retry") })
    await fault("lyra-a", { mode: "none" })
    const ended = await finished(run.id)
    expect(ended.status).toBe("completed")
    const types = (await runs.events(run.id)).events.map((e) => e.type)
    expect(types[0]).toBe("node.started")
    expect(types.slice(-2)).toEqual(["node.completed", "outcome"])
    expect(types.filter((t) => t === "node.retry").length).toBeGreaterThanOrEqual(1)
    expect(types.filter((t) => t === "node.started").length).toBe(1)
    expect(ended.usage.costUsd).toBeGreaterThan(0)
  })

  it("refuses a caller outcome whose status is not terminal (400 naming events[i].status), and bad reasons", inOrder, async () => {
    const run = (await runs.create({ metadata: { manual: true } })).body.run
    for (const [event, field] of [
      [{ type: "outcome", status: "done" }, "events[1].status"],
      [{ type: "outcome", status: "running" }, "events[1].status"],
      [{ type: "outcome", status: 3 }, "events[1].status"],
      [{ type: "outcome", status: "failed", reason: { why: 1 } }, "events[1].reason"]
    ] as const) {
      const res = await runs.append(run.id, [{ type: "note" }, event])
      expect(res.status, JSON.stringify(event)).toBe(400)
      expect(res.body.error.type).toBe("invalid_request")
      expect(res.body.error.message).toContain(field)
    }
    expect((await runs.get(run.id)).body.run).toMatchObject({ status: "running", lastSeq: 0 })
    // no status: completed, and the log says so too
    expect((await runs.append(run.id, [{ type: "outcome", reason: "all good" }])).status).toBe(200)
    expect((await runs.get(run.id)).body.run.outcome).toEqual({ status: "completed", reason: "all good" })
    expect((await runs.events(run.id)).events).toEqual([{ type: "outcome", status: "completed", reason: "all good", seq: 1 }])
  })

  it("commits the event stream's headers at once, before any event or heartbeat exists", inOrder, async () => {
    const run = (await runs.create({})).body.run
    const started = Date.now()
    const res = await fetch(`${gw.baseUrl}/v1/agent-runs/${run.id}/events`, {
      headers: { authorization: `Bearer ${runs.key}` },
      signal: AbortSignal.timeout(5_000)
    })
    expect(res.status).toBe(200)
    expect(res.headers.get("content-type")).toContain("text/event-stream")
    expect(Date.now() - started).toBeLessThan(3_000)
    await res.body?.cancel()
  })

  it("a revoked key's live runs end failed/key_revoked: one waiting for tool results, one caller-driven", { ...inOrder, timeout: 40_000 }, async () => {
    const created = (await (await gw.admin("POST", "/admin/v1/keys", { name: "to revoke", plan: "pro" })).json()) as { id: string; key: string }
    const mine = client(gw.baseUrl, created.key)
    const waiting = (await mine.create({ model: "pico", input: "use lookup", tools: [lookupTool] })).body.run
    await mine.waitFor(waiting.id, (r) => r.status === "requires_action")
    const manual = (await mine.create({ metadata: { manual: true } })).body.run
    const streams = [waiting.id, manual.id].map((id) => mine.events(id, { timeoutMs: 25_000 }))
    await new Promise((r) => setTimeout(r, 300))
    expect((await gw.admin("DELETE", `/admin/v1/keys/${created.id}`)).status).toBe(200)
    for (const sse of await Promise.all(streams)) {
      expect(sse.ended).toBe(true)
      expect(sse.events[sse.events.length - 1]).toMatchObject({ type: "outcome", status: "failed", reason: "key_revoked" })
      expect(checkLog(sse.events)).toEqual({ gapFree: true, outcomes: 1, outcomeLast: true })
    }
  })

  it("a run whose stored request no longer fits its model after a config change ends failed/execution_error", { ...inOrder, timeout: 60_000 }, async () => {
    const input = [{ role: "user", content: [{ type: "image", source: { type: "base64", media_type: "image/png", data: PNG } }, { type: "text", text: "use lookup" }] }]
    const run = (await runs.create({ model: "nova-mini", input, tools: [lookupTool] })).body.run
    const waiting = await runs.waitFor(run.id, (r) => r.status === "requires_action")
    await gw.stop()
    // the same data, but nova-mini no longer reads images
    gw = await startInProcessGateway({
      ...env,
      ...fastConfigEnv(env.GATEWAY_DATA_DIR!, (config) => {
        config.models.find((m: any) => m.id === "svc-nova-mini").capabilities.vision = false
      })
    })
    runs = client(gw.baseUrl, runs.key)
    await runs.append(run.id, [{ type: "tool.result", toolUseId: waiting.requiredAction.toolCalls[0].id, content: "found" }])
    const ended = await finished(run.id)
    expect(ended.outcome).toEqual({ status: "failed", reason: "execution_error" })
    const outcome = (await runs.events(run.id)).events.at(-1)
    expect(outcome.error.type).toBe("invalid_request_error")
    expect(outcome.error.message).toContain("images")
  })
})
