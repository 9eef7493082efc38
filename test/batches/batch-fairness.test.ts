/**
 * Batches share the workers fairly: one tenant's large batch does not hold another's small one
 * until it is done. Claims take the pending request with the lowest index first, across batches
 * (the older batch first at a tie), so a batch created later catches up with the ones running.
 * With one worker (GATEWAY_BATCH_CONCURRENCY=1) claims were strictly oldest batch first: a second
 * tenant's three requests waited behind all 600 of the first's.
 */
import OpenAI, { toFile } from "openai"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { embeddedEngine } from "../support/engines.ts"
import { fastConfigEnv } from "../support/fast-config.ts"
import type { GatewayHandle } from "../support/gateway-process.ts"
import { startInProcessGateway } from "../support/in-process-gateway.ts"
import { keyFor, waitForBatch } from "./support.ts"

const jsonl = (count: number, prefix: string) =>
  Array.from({ length: count }, (_, i) =>
    JSON.stringify({ custom_id: `${prefix}${i}`, method: "POST", url: "/v1/chat/completions", body: { model: "svc-pico-1", max_tokens: 4, messages: [{ role: "user", content: `hi ${i}` }] } })).join("\n") + "\n"

describe("batches of two tenants (embedded)", () => {
  let gw: GatewayHandle
  let cleanup: () => Promise<void>
  beforeAll(async () => {
    const setup = await embeddedEngine.setup()
    cleanup = setup.cleanup
    gw = await startInProcessGateway({ ...setup.env, ...fastConfigEnv(setup.env.GATEWAY_DATA_DIR), GATEWAY_BATCH_CONCURRENCY: "1", GATEWAY_BATCH_POLL_MS: "50" })
  })
  afterAll(async () => {
    await gw?.stop()
    await cleanup?.()
  })

  const batchOf = async (client: OpenAI, lines: string) => {
    const file = await client.files.create({ file: await toFile(Buffer.from(lines), "input.jsonl"), purpose: "batch" })
    return client.batches.create({ input_file_id: file.id, endpoint: "/v1/chat/completions", completion_window: "24h" })
  }

  it("a small batch created while a large one runs ends long before it", async () => {
    const first = new OpenAI({ apiKey: await keyFor(gw, "large"), baseURL: `${gw.baseUrl}/v1`, maxRetries: 0 })
    const second = new OpenAI({ apiKey: await keyFor(gw, "small"), baseURL: `${gw.baseUrl}/v1`, maxRetries: 0 })
    const large = await batchOf(first, jsonl(600, "l"))
    await waitForBatch(() => first.batches.retrieve(large.id), (b) => (b.request_counts?.completed ?? 0) >= 1)
    const small = await batchOf(second, jsonl(3, "s"))
    const done = await waitForBatch(() => second.batches.retrieve(small.id), (b) => b.status === "completed")
    expect(done.request_counts).toMatchObject({ total: 3, completed: 3 })
    const meanwhile = await first.batches.retrieve(large.id)
    expect(meanwhile.status).toBe("in_progress")
    // The small batch's three went in among the large one's first requests, not after its 600.
    expect(meanwhile.request_counts?.completed ?? 0).toBeLessThan(300)
    await first.batches.cancel(large.id)
  })
})
