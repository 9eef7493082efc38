/**
 * Crash safety with real processes: a gateway is killed with SIGKILL while a run's step is in
 * flight, and the run still reaches exactly one outcome — resumed by the same instance after a
 * restart on the same data dir (embedded), or by a second instance on PostgreSQL + Redis, whose
 * SSE subscribers see every event the other instance wrote. Also across two instances: cancel and
 * tool results reach the owner, and concurrent state appends lose nothing.
 */
import { afterAll, describe, expect, inject, it } from "vitest"
import { embeddedDataDir } from "../support/engines.ts"
import { fastConfigEnv } from "../support/fast-config.ts"
import { type GatewayProcess, startGateway } from "../support/gateway-process.ts"
import { startInProcessGateway } from "../support/in-process-gateway.ts"
import { twoInstances } from "../support/two-instances.ts"
import { rmSync } from "node:fs"
import { checkLog, client } from "./support.ts"

const lookupTool = { name: "lookup", input_schema: { type: "object", properties: { q: { type: "string" } } } }

/** pico answers slowly (~1 s to the first token, then ~25 tokens/s): a step is in flight for seconds. */
const slowEnv = (dir: string) => ({
  ...fastConfigEnv(dir, (config) => {
    for (const p of config.models.find((m: any) => m.id === "svc-pico-1").placements) p.simulator = { ttftMs: 1_000, tokensPerSecond: 25 }
  }),
  GATEWAY_RUN_LEASE_MS: "2000"
})

const micros = (usd: number) => Math.round(usd * 1e6)

/** What a recovered log must show: every seq once, one outcome, each step completed (and charged) once. */
const expectRecovered = (events: ReadonlyArray<any>, run: any, steps: number) => {
  expect(checkLog(events)).toEqual({ gapFree: true, outcomes: 1, outcomeLast: true })
  const started = events.filter((e) => e.type === "node.started").map((e) => e.nodeId)
  const completed = events.filter((e) => e.type === "node.completed")
  expect(new Set(started).size).toBe(steps)
  expect(started.length).toBe(steps) // a re-run step is not started twice in the log
  expect(completed.map((e) => e.nodeId)).toEqual(started)
  expect(events.filter((e) => e.type === "run.resumed").length).toBeGreaterThanOrEqual(1)
  expect(events[events.length - 1]).toMatchObject({ type: "outcome", status: "completed" })
  expect(micros(run.usage.costUsd)).toBe(completed.reduce((sum, e) => sum + micros(e.costUsd), 0))
  expect(run.usage.outputTokens).toBe(completed.reduce((sum, e) => sum + e.usage.outputTokens, 0))
}

/** Runs a two-step run (tool wait between) and kills `victim` while the second step streams. */
const killDuringSecondStep = async (victim: GatewayProcess, baseUrl = victim.baseUrl) => {
  const runs = client(baseUrl, victim.apiKey!)
  const run = (await runs.create({ model: "pico", input: "use lookup", tools: [lookupTool] })).body.run
  const waiting = await runs.waitFor(run.id, (r) => r.status === "requires_action")
  await runs.append(run.id, [{ type: "tool.result", toolUseId: waiting.requiredAction.toolCalls[0].id, content: "found" }])
  await runs.events(run.id, { until: (frames) => frames.filter((f) => f.event === "node.started").length === 2 })
  victim.child.kill("SIGKILL")
  await victim.stop()
  return run.id as string
}

// The three suites are independent (their own data dirs and databases) and mostly wait on slow
// steps, leases and restarts: they run side by side. Within a suite the steps run in order.
describe.concurrent("kill -9 and restart on the same data dir (embedded)", () => {
  const dir = embeddedDataDir()
  afterAll(() => rmSync(dir, { recursive: true, force: true }))

  it("resumes the interrupted step from the log and ends with one outcome", { concurrent: false, timeout: 90_000 }, async ({ expect }) => {
    const env = { GATEWAY_DATA_DIR: dir, ...slowEnv(dir) }
    const first = await startGateway(env)
    const runId = await killDuringSecondStep(first)
    const second = await startInProcessGateway(env) // the recovering instance: its process is not the subject
    try {
      const runs = client(second.baseUrl, first.apiKey!)
      const done = await runs.waitFor(runId, (r) => r.status === "completed", 40_000)
      expect(done.attempt).toBe(2)
      const sse = await runs.events(runId)
      expectRecovered(sse.events, done, 2)
      expect(sse.events.find((e) => e.type === "run.resumed")).toMatchObject({ attempt: 2 })
    } finally {
      await second.stop()
    }
  })
})

describe.concurrent("a run that keeps losing its instance (embedded)", () => {
  const dir = embeddedDataDir()
  afterAll(() => rmSync(dir, { recursive: true, force: true }))

  it("ends failed with reason max_attempts once it was taken over more than GATEWAY_RUN_MAX_ATTEMPTS times", { concurrent: false, timeout: 90_000 }, async ({ expect }) => {
    const env = { GATEWAY_DATA_DIR: dir, ...slowEnv(dir), GATEWAY_RUN_MAX_ATTEMPTS: "1" }
    const first = await startGateway(env)
    const runs = client(first.baseUrl, first.apiKey!)
    const run = (await runs.create({ model: "pico", input: "hello" })).body.run
    await runs.events(run.id, { until: (frames) => frames.some((f) => f.event === "node.started") })
    first.child.kill("SIGKILL")
    await first.stop()
    const second = await startInProcessGateway(env) // the recovering instance: its process is not the subject
    try {
      const again = client(second.baseUrl, first.apiKey!)
      const failed = await again.waitFor(run.id, (r) => r.status !== "running", 40_000)
      expect(failed.outcome).toEqual({ status: "failed", reason: "max_attempts" })
      const sse = await again.events(run.id)
      expect(sse.events.map((e) => e.type)).toEqual(["node.started", "outcome"])
      expect(checkLog(sse.events).gapFree).toBe(true)
    } finally {
      await second.stop()
    }
  })
})

const { postgresUrl, redisUrl } = inject("services")

describe.runIf(postgresUrl !== null && redisUrl !== null).concurrent("two instances on PostgreSQL + Redis", () => {
  const pair = twoInstances({ postgresUrl: postgresUrl!, redisUrl: redisUrl! }, "run-recovery", slowEnv)

  it("a subscriber on B sees live what A writes; tool results and cancel sent to B reach A's actor", { concurrent: false, timeout: 60_000 }, async ({ expect }) => {
    const { a, b } = pair
    const onA = client(a.baseUrl, a.apiKey!)
    const onB = client(b.baseUrl, a.apiKey!)
    const run = (await onA.create({ model: "pico", input: "use lookup", tools: [lookupTool] })).body.run
    const live = onB.events(run.id)
    const waiting = await onB.waitFor(run.id, (r) => r.status === "requires_action")
    await onB.append(run.id, [{ type: "tool.result", toolUseId: waiting.requiredAction.toolCalls[0].id, content: "found" }])
    const sse = await live
    expect(sse.ended).toBe(true)
    expect(sse.events.map((e) => e.type)).toEqual(["node.started", "node.completed", "tool.result", "node.started", "node.completed", "outcome"])
    expect(checkLog(sse.events).gapFree).toBe(true)

    const slow = (await onA.create({ model: "pico", input: "a long answer" })).body.run
    await onB.events(slow.id, { until: (frames) => frames.some((f) => f.event === "node.started") })
    const cancelled = await onB.cancel(slow.id, "from B")
    expect(cancelled.body.run.status).toBe("cancelled")
    const after = await onA.events(slow.id)
    expect(after.events.map((e) => e.type)).toEqual(["node.started", "outcome"])
    // A stopped the step: nothing more is written, and the partial step is charged to the run
    await new Promise((r) => setTimeout(r, 1_500))
    expect((await onA.get(slow.id)).body.run.lastSeq).toBe(2)
  })

  it("concurrent state appends through both instances never lose a delta", { concurrent: false }, async ({ expect }) => {
    const { a, b } = pair
    const instances = [client(a.baseUrl, a.apiKey!), client(b.baseUrl, a.apiKey!)]
    const onB = instances[1]
    const id = (await onB.call("POST", "/v1/states", { value: [] })).body.state.stateId
    const writers = 30
    const results = await Promise.all(Array.from({ length: writers }, (_, i) => instances[i % 2].call("POST", `/v1/states/${id}:append`, { delta: [i] })))
    expect(results.every((r) => r.status === 200)).toBe(true)
    const final = (await onB.call("GET", `/v1/states/${id}`)).body.state
    expect(final.seq).toBe(writers)
    expect([...final.value].sort((x: number, y: number) => x - y)).toEqual(Array.from({ length: writers }, (_, i) => i))
  })

  it("after kill -9 of A mid-step, B takes the lease over and finishes the run; B's stream shows every event once", { concurrent: false, timeout: 90_000 }, async ({ expect }) => {
    const { a, b } = pair
    const onB = client(b.baseUrl, a.apiKey!)
    const runId = await killDuringSecondStep(a)
    const done = await onB.waitFor(runId, (r) => r.status === "completed", 40_000)
    expect(done.attempt).toBe(2)
    const sse = await onB.events(runId)
    expectRecovered(sse.events, done, 2)
  })
})
