/**
 * A stalled Redis (SIGSTOP of the gateway's own private redis-server: connections stay open, the
 * kernel takes the bytes, nothing answers) must not hold requests without end. While it stalls,
 * every call gets an answer within a few of Redis's command deadlines (1 s): a 503 naming the
 * store, since the allowance fails closed. Once it answers again, calls are answered, and every
 * answered call is in the ledger once.
 */
import { randomBytes } from "node:crypto"
import OpenAI from "openai"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { embeddedDataDir } from "../support/engines.ts"
import { fastConfigEnv } from "../support/fast-config.ts"
import type { GatewayHandle } from "../support/gateway-process.ts"
import { startInProcessGateway } from "../support/in-process-gateway.ts"
import { type PrivateRedis, startPrivateRedis } from "../support/private-redis.ts"
import { createKey } from "./support.ts"

/**
 * Redis's command deadline is 1 s (`coordination/redis-client.ts`) and a call's admission tries up
 * to three commands (the one-trip gate, then each policy on its own): 3.0 s here for the calls that
 * meet the stall, against 30 s and more (the client's own timeout) without the deadline. After three
 * deadlines of silence the client sends nothing more and fails at once (8–9 ms here; each waited
 * 5.0 s before that rule), until Redis answers.
 */
const ANSWERED_WITHIN_MS = 10_000

describe("a stalled Redis", () => {
  let gw: GatewayHandle
  let redis: PrivateRedis
  const dir = embeddedDataDir()

  beforeAll(async () => {
    redis = await startPrivateRedis()
    gw = await startInProcessGateway({
      GATEWAY_DATA_DIR: dir,
      ...fastConfigEnv(dir),
      REDIS_URL: redis.url,
      GATEWAY_REDIS_PREFIX: `gw-stall-${randomBytes(4).toString("hex")}:`
    })
  }, 120_000)

  afterAll(async () => {
    redis?.resume()
    await gw?.stop()
    await redis?.stop()
  })

  it("answers every call while it stalls, and works again once it answers", async () => {
    const key = await createKey(gw)
    const openai = new OpenAI({ apiKey: key.secret, baseURL: `${gw.baseUrl}/v1`, maxRetries: 0, timeout: 30_000 })
    const call = async (stream: boolean) => {
      const started = performance.now()
      try {
        if (stream) {
          const chunks = await openai.chat.completions.create({ model: "svc-pico-1", max_tokens: 16, stream: true, messages: [{ role: "user", content: "hello" }] })
          for await (const _ of chunks) { /* read to the end */ }
        } else {
          await openai.chat.completions.create({ model: "svc-pico-1", max_tokens: 16, messages: [{ role: "user", content: "hello" }] })
        }
        return { status: 200, ms: performance.now() - started }
      } catch (error) {
        return { status: error instanceof OpenAI.APIError ? error.status : String(error), message: (error as Error).message, ms: performance.now() - started }
      }
    }
    expect((await call(false)).status).toBe(200)
    expect((await call(true)).status).toBe(200)

    redis.pause()
    const stalled = await Promise.all([call(false), call(true), call(false), call(true)])
    const later = await Promise.all([call(false), call(true)])
    redis.resume()
    for (const answer of [...stalled, ...later]) {
      expect(answer.status).toBe(503)
      expect(answer.message).toMatch(/allowance store is unavailable/)
      expect(answer.ms).toBeLessThan(ANSWERED_WITHIN_MS)
    }

    await expect.poll(async () => (await call(false)).status, { timeout: 20_000 }).toBe(200)
    expect((await call(true)).status).toBe(200)
  }, 90_000)
})
