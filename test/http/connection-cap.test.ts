/**
 * Clients cannot take the file descriptors the gateway needs for its own work
 * (`GATEWAY_MAX_CONNECTIONS`). A gateway process whose open-file limit is 1,024 (`prlimit`) is
 * sent 1,000 connections that stay silent: past its cap, new ones are closed at once (counted in
 * `/metrics`, logged), and a call on a connection opened before still reaches its upstream.
 * Without the cap the server takes connections until the limit, and that call's upstream
 * connection fails (EMFILE).
 */
import { rmSync } from "node:fs"
import { connect, type Socket } from "node:net"
import { Client } from "undici"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { freshDataDir } from "../support/engines.ts"
import { fastConfigEnv } from "../support/fast-config.ts"
import { type GatewayProcess, startGateway } from "../support/gateway-process.ts"
import { type RunawayUpstream, startRunawayUpstream } from "../support/runaway-upstream.ts"

const OPEN_FILES = 1_024
const FLOOD = 1_000

describe("the connection cap", () => {
  let upstream: RunawayUpstream
  let gw: GatewayProcess
  const dir = freshDataDir()

  beforeAll(async () => {
    upstream = await startRunawayUpstream()
    upstream.stopAfterWords = 16
    gw = await startGateway({
      GATEWAY_DATA_DIR: dir,
      // The silent connections stay open for the whole test unless the cap closes them.
      GATEWAY_HEADERS_TIMEOUT_MS: "60000",
      ...fastConfigEnv(dir, (config) => {
        const pico = config.models.find((m: { id: string }) => m.id === "svc-pico-1")
        pico.placements = [{ id: "pico-up", backend: "openai-compatible", capacity: 8, baseUrl: `${upstream.url}/v1`, upstreamModel: "upstream-pico" }]
        pico.equivalents = []
      })
    }, [], ["prlimit", `--nofile=${OPEN_FILES}:${OPEN_FILES}`])
  }, 60_000)

  afterAll(async () => {
    await gw?.stop()
    await upstream?.close()
    rmSync(dir, { recursive: true, force: true })
  })

  it("closes new connections past it at once, and keeps descriptors for the gateway's own calls", async () => {
    // One connection opened before the flood, kept alive through it.
    const kept = new Client(gw.baseUrl, { keepAliveTimeout: 120_000, keepAliveMaxTimeout: 120_000 })
    const sockets: Array<Socket> = []
    try {
      const call = async (method: "GET" | "POST", path: string, authorization: string, body?: unknown) => {
        const res = await kept.request({
          method,
          path,
          headers: { authorization: `Bearer ${authorization}`, "content-type": "application/json" },
          ...(body === undefined ? {} : { body: JSON.stringify(body) })
        })
        return { status: res.statusCode, text: await res.body.text() }
      }
      expect((await call("GET", "/v1/models", gw.apiKey!)).status).toBe(200)

      let settled = 0
      let closed = 0
      for (let i = 0; i < FLOOD; i++) {
        const socket = connect(Number(new URL(gw.baseUrl).port), "127.0.0.1")
        socket.on("error", () => {})
        socket.once("connect", () => settled++)
        socket.once("close", () => closed++)
        sockets.push(socket)
      }
      await expect.poll(() => settled, { timeout: 20_000 }).toBe(FLOOD)
      await expect.poll(() => closed, { timeout: 20_000, message: "no connection was closed" }).toBeGreaterThan(0)

      const streamed = await call("POST", "/v1/chat/completions", gw.apiKey!, { model: "svc-pico-1", stream: true, messages: [{ role: "user", content: "hello" }] })
      expect(streamed.status, streamed.text).toBe(200)
      expect(streamed.text).toContain("data: [DONE]")

      const metrics = await call("GET", "/metrics", gw.adminToken)
      const dropped = Number(/^gateway_connections_dropped_total(?:\{[^}]*\})? (\d+)/m.exec(metrics.text)?.[1])
      expect(dropped).toBeGreaterThan(0)
      expect(gw.output()).toMatch(/closed \d+ new connection\(s\) at once: \d+ are open \(GATEWAY_MAX_CONNECTIONS\)/)
    } finally {
      for (const socket of sockets) socket.destroy()
      await kept.close()
    }
    // With the flood gone, new connections are taken again.
    await expect.poll(async () => (await fetch(`${gw.baseUrl}/healthz`).catch(() => undefined))?.status, { timeout: 10_000 }).toBe(200)
  }, 90_000)
})
