/**
 * SIGTERM stops accepting, lets an in-flight stream finish, closes the stores and exits 0; a stream
 * still open when the grace period ends is cut, charged what it delivered and logged.
 */
import { rmSync } from "node:fs"
import { connect } from "node:net"
import { describe, expect, it } from "vitest"
import { embeddedDataDir } from "../support/engines.ts"
import { fastConfigEnv } from "../support/fast-config.ts"
import { startGateway } from "../support/gateway-process.ts"

describe("graceful shutdown", () => {
  it("finishes an in-flight stream after SIGTERM, then exits 0", async () => {
    const dir = embeddedDataDir()
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

  it("cuts a stream still open when the grace period ends, and charges and logs what it delivered", async () => {
    const dir = embeddedDataDir()
    const env = fastConfigEnv(dir, (config) => {
      const pico = config.models.find((m: { id: string }) => m.id === "svc-pico-1")
      pico.placements[0].simulator = { ttftMs: 0, tokensPerSecond: 10 }
    })
    const gw = await startGateway({ GATEWAY_DATA_DIR: dir, ...env, GATEWAY_SHUTDOWN_GRACE_MS: "1000" })
    try {
      const res = await fetch(`${gw.baseUrl}/v1/chat/completions`, {
        method: "POST",
        headers: { authorization: `Bearer ${gw.apiKey}`, "content-type": "application/json" },
        // ~30 s of tokens at 10 a second: far past the grace period.
        body: JSON.stringify({ model: "svc-pico-1", stream: true, max_tokens: 300, messages: [{ role: "user", content: "tell me a long story" }] })
      })
      expect(res.status).toBe(200)
      const reader = res.body!.getReader()
      expect((await reader.read()).done).toBe(false)
      const stoppedAt = performance.now()
      const exit = gw.stop("SIGTERM")
      // The stream is cut (the body fails or ends without [DONE]) once the grace period is over.
      let text = ""
      try {
        for (;;) {
          const chunk = await reader.read()
          if (chunk.done) break
          text += new TextDecoder().decode(chunk.value)
        }
      } catch {
        // a cut connection
      }
      expect(text).not.toContain("[DONE]")
      expect(await exit).toBe(0)
      expect(performance.now() - stoppedAt).toBeLessThan(15_000)
      const line = gw.output().split("\n").find((l) => l.includes('"msg":"request"') && l.includes('"path":"/v1/chat/completions"'))
      expect(line).toBeDefined()
      const logged = JSON.parse(line!)
      expect(logged.status).toBe(200)
      expect(logged.stream).toBe(true)
      expect(logged.output_tokens).toBeGreaterThan(0)
      expect(logged.cost_usd).toBeGreaterThan(0)
    } finally {
      await gw.stop()
      rmSync(dir, { recursive: true, force: true })
    }
  }, 60_000)

  it("is not held by connections with nothing in flight, one that never sent a request included", async () => {
    const dir = embeddedDataDir()
    // Without the fix the stop waited for such a connection until the grace period (or the
    // headers timeout) ran out: both are far longer here than the stop may take.
    const gw = await startGateway({ GATEWAY_DATA_DIR: dir, ...fastConfigEnv(dir, () => {}), GATEWAY_SHUTDOWN_GRACE_MS: "60000", GATEWAY_HEADERS_TIMEOUT_MS: "60000" })
    try {
      // A keep-alive connection between requests, and one opened ahead of need (clients and
      // proxies do that) that has sent nothing.
      expect((await fetch(`${gw.baseUrl}/v1/models`)).status).toBe(200)
      const { hostname, port } = new URL(gw.baseUrl)
      const silent = connect(Number(port), hostname)
      await new Promise<void>((resolve) => silent.once("connect", () => resolve()))
      const closedByServer = new Promise<void>((resolve) => silent.once("close", () => resolve()))
      const exited = gw.stop("SIGTERM")
      const outcome = await Promise.race([exited.then((code) => ({ code })), new Promise<"held">((r) => setTimeout(() => r("held"), 20_000))])
      expect(outcome).toEqual({ code: 0 })
      await closedByServer
    } finally {
      await gw.stop()
      rmSync(dir, { recursive: true, force: true })
    }
  }, 60_000)
})
