/**
 * The usage ledger is written off the request path in batches; a graceful stop flushes what is
 * still buffered, so a restart (or another instance) reads every call. On both storage engines.
 */
import { describe, expect, it } from "vitest"
import { engines, freshDataDir } from "../support/engines.ts"
import { fastConfigEnv } from "../support/fast-config.ts"
import { startGateway } from "../support/gateway-process.ts"
import { startInProcessGateway } from "../support/in-process-gateway.ts"
import { post } from "./support.ts"

describe.each(engines())("usage ledger across a graceful stop ($name)", (engine) => {
  it("keeps every call's usage when the gateway stops right after answering", async () => {
    const setup = await engine.setup()
    const dir = freshDataDir()
    // A long flush interval: the calls below are still buffered when SIGTERM arrives.
    const env = { ...setup.env, ...fastConfigEnv(dir), GATEWAY_ADMIN_TOKEN: "admin-durability" }
    try {
      const first = await startGateway(env)
      const key = first.apiKey!
      for (let i = 0; i < 3; i++) {
        const res = await post(first, "/v1/messages", key, { model: "svc-nova-mini", max_tokens: 50, messages: [{ role: "user", content: `call ${i}` }] })
        expect(res.status).toBe(200)
      }
      const embedded = await post(first, "/v1/embeddings", key, { model: "svc-embed-mini", input: ["a", "b"] })
      expect(embedded.status).toBe(200)
      expect(await first.stop()).toBe(0)

      const second = await startInProcessGateway(env) // what the stop left in storage, read by any instance
      try {
        const usage = (await (await second.admin("GET", "/admin/v1/usage")).json()) as { data: Array<{ model: string; requests: number; outputTokens: number }> }
        const byModel = Object.fromEntries(usage.data.map((row) => [row.model, row]))
        expect(byModel["svc-nova-mini"].requests).toBe(3)
        expect(byModel["svc-nova-mini"].outputTokens).toBeGreaterThan(0)
        expect(byModel["svc-embed-mini"].requests).toBe(1)
      } finally {
        await second.stop()
      }
    } finally {
      await setup.cleanup()
    }
  }, 90_000)
})
