/**
 * A client that hangs up while the gateway still waits for the upstream's answer ends the upstream
 * call at once, streamed or not, on either upstream adapter (OpenAI-compatible, Anthropic): the
 * upstream (here one that reads the request and never answers, like a model whose first token is
 * far off) sees its connection close, instead of generating for nobody until its headers or a
 * timeout come.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type HoldingUpstream, startHoldingUpstream } from "../support/holding-upstream.ts"
import { createKey, gatewayOnUpstream, type TestGateway } from "./support.ts"

describe("a client that leaves before the upstream answers", () => {
  let upstream: HoldingUpstream
  let gw: TestGateway
  let key: string

  beforeAll(async () => {
    upstream = await startHoldingUpstream()
    gw = await gatewayOnUpstream(upstream.url)
    key = (await createKey(gw)).secret
  })

  afterAll(async () => {
    await upstream?.close()
    await gw?.close()
  })

  for (const [model, backend] of [["svc-pico-1", "openai-compatible"], ["svc-lyra-3", "anthropic"]] as const) for (const stream of [true, false]) {
    it(`ends the upstream call at once (${backend}, ${stream ? "streamed" : "non-streamed"})`, async () => {
      const before = { ...upstream.seen }
      const client = new AbortController()
      const answer = fetch(`${gw.baseUrl}/v1/chat/completions`, {
        method: "POST",
        headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
        body: JSON.stringify({ model, stream, messages: [{ role: "user", content: "hello" }] }),
        signal: client.signal
      }).then((response) => response.text())
      await expect.poll(() => upstream.seen.received, { timeout: 10_000 }).toBe(before.received + 1)
      client.abort()
      await expect(answer).rejects.toThrow()
      await expect.poll(() => upstream.seen.closed, { timeout: 3_000 }).toBe(before.closed + 1)
    })
  }
})
