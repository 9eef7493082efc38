/** SIGTERM stops accepting, lets an in-flight stream finish, closes the stores and exits 0. */
import { rmSync } from "node:fs"
import { describe, expect, it } from "vitest"
import { freshDataDir } from "../support/engines.ts"
import { fastConfigEnv } from "../support/fast-config.ts"
import { startGateway } from "../support/gateway-process.ts"

describe("graceful shutdown", () => {
  it("finishes an in-flight stream after SIGTERM, then exits 0", async () => {
    const dir = freshDataDir()
    const env = fastConfigEnv(dir, (config) => {
      const pico = config.models.find((m: { id: string }) => m.id === "svc-pico-1")
      pico.placements[0].simulator = { ttftMs: 0, tokensPerSecond: 40 }
    })
    const gw = await startGateway({ GATEWAY_DATA_DIR: dir, ...env })
    try {
      const res = await fetch(`${gw.baseUrl}/v1/chat/completions`, {
        method: "POST",
        headers: { authorization: `Bearer ${gw.apiKey}`, "content-type": "application/json" },
        body: JSON.stringify({ model: "svc-pico-1", stream: true, max_tokens: 60, messages: [{ role: "user", content: "tell me a long story" }] })
      })
      expect(res.status).toBe(200)
      const reader = res.body!.getReader()
      const first = await reader.read()
      expect(first.done).toBe(false)
      const exit = gw.stop("SIGTERM")
      let text = new TextDecoder().decode(first.value)
      for (;;) {
        const chunk = await reader.read()
        if (chunk.done) break
        text += new TextDecoder().decode(chunk.value)
      }
      expect(text.trimEnd().endsWith("data: [DONE]")).toBe(true)
      expect(text).toMatch(/"finish_reason":"(length|stop)"/)
      expect(text.split("data: ").length).toBeGreaterThan(5)
      expect(await exit).toBe(0)
      const after = await fetch(`${gw.baseUrl}/v1/models`).then((r) => r.status, () => "refused")
      expect(after).toBe("refused")
    } finally {
      await gw.stop()
      rmSync(dir, { recursive: true, force: true })
    }
  }, 60_000)
})
