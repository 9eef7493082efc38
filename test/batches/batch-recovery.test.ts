/**
 * Durability with real processes: a gateway is killed with SIGKILL while a batch's requests are
 * in flight, and the batch still ends with every custom_id answered exactly once — resumed by the
 * same instance after a restart on the same data dir (embedded), or taken over by a second
 * instance on PostgreSQL + Redis (both work on the batch until the kill).
 */
import Anthropic from "@anthropic-ai/sdk"
import { rmSync } from "node:fs"
import { afterAll, describe, expect, inject, it } from "vitest"
import { embeddedDataDir } from "../support/engines.ts"
import { fastConfigEnv } from "../support/fast-config.ts"
import { type GatewayProcess, startGateway } from "../support/gateway-process.ts"
import { startInProcessGateway } from "../support/in-process-gateway.ts"
import { twoInstances } from "../support/two-instances.ts"
import { waitForBatch } from "./support.ts"

const REQUESTS = 12

/** pico answers slowly (~0.5 s a request); short leases, so a dead instance's requests lapse soon. */
const slowEnv = (dir: string) => ({
  ...fastConfigEnv(dir, (config) => {
    for (const p of config.models.find((m: any) => m.id === "svc-pico-1").placements) p.simulator = { ttftMs: 400, tokensPerSecond: 40 }
  }),
  GATEWAY_BATCH_LEASE_MS: "1500",
  GATEWAY_BATCH_CONCURRENCY: "3",
  GATEWAY_BATCH_POLL_MS: "100"
})

const requests = Array.from({ length: REQUESTS }, (_, i) => ({
  custom_id: `job-${i}`,
  params: { model: "svc-pico-1", max_tokens: 32, messages: [{ role: "user" as const, content: `say exactly: result ${i}` }] }
}))

/** Starts a batch on `victim`, kills it with SIGKILL once some requests are done and others in flight. */
const killMidBatch = async (victim: GatewayProcess, key: string) => {
  const client = new Anthropic({ apiKey: key, baseURL: victim.baseUrl, maxRetries: 0 })
  const batch = await client.messages.batches.create({ requests })
  await waitForBatch(() => client.messages.batches.retrieve(batch.id), (b) => b.request_counts.succeeded >= 2, 30_000)
  victim.child.kill("SIGKILL")
  await victim.stop()
  return batch.id
}

/** Every custom_id exactly once, each with its own answer. */
const expectExactlyOnce = async (client: Anthropic, batchId: string) => {
  const ended = await waitForBatch(() => client.messages.batches.retrieve(batchId), (b) => b.processing_status === "ended", 60_000)
  expect(ended.request_counts).toEqual({ processing: 0, succeeded: REQUESTS, errored: 0, canceled: 0, expired: 0 })
  const lines = []
  for await (const line of await client.messages.batches.results(batchId)) lines.push(line)
  expect(lines.map((l) => l.custom_id)).toEqual(requests.map((r) => r.custom_id))
  for (const [i, line] of lines.entries()) {
    expect(line.result.type).toBe("succeeded")
    if (line.result.type === "succeeded") expect(line.result.message.content).toEqual([{ type: "text", text: `result ${i}` }])
  }
}

describe("kill -9 mid-batch and restart on the same data dir (embedded)", () => {
  const dir = embeddedDataDir()
  afterAll(() => rmSync(dir, { recursive: true, force: true }))

  it("resumes the requests that were in flight; every custom_id gets exactly one result", async () => {
    const env = { GATEWAY_DATA_DIR: dir, ...slowEnv(dir) }
    const first = await startGateway(env)
    const batchId = await killMidBatch(first, first.apiKey!)
    const second = await startInProcessGateway(env) // the recovering instance: its process is not the subject
    try {
      await expectExactlyOnce(new Anthropic({ apiKey: first.apiKey!, baseURL: second.baseUrl, maxRetries: 0 }), batchId)
    } finally {
      await second.stop()
    }
  }, 120_000)
})

const { postgresUrl, redisUrl } = inject("services")

describe.runIf(postgresUrl !== null && redisUrl !== null)("two instances on PostgreSQL + Redis", () => {
  const pair = twoInstances({ postgresUrl: postgresUrl!, redisUrl: redisUrl! }, "batch-recovery", slowEnv)

  it("B takes over what A held when A is killed; every custom_id gets exactly one result", async () => {
    const { a, b } = pair
    const batchId = await killMidBatch(a, a.apiKey!)
    await expectExactlyOnce(new Anthropic({ apiKey: a.apiKey!, baseURL: b.baseUrl, maxRetries: 0 }), batchId).catch((error) => {
      // What B logged is the first thing to read when a takeover stalls.
      console.error(`instance B output:\n${b.output().slice(-4000)}`)
      throw error
    })
  }, 120_000)
})
