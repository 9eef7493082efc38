/**
 * `GET /metrics` on the real gateway, scraped before and after real traffic from the official SDKs
 * and parsed as the Prometheus text format: counters and histograms move by what was sent, queue
 * and circuit gauges show a full placement and an open circuit, and the scrape is protected by the
 * admin token (or served without one on `GATEWAY_METRICS_PORT`).
 */
import Anthropic from "@anthropic-ai/sdk"
import { connect } from "node:net"
import OpenAI from "openai"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { createKey, gatewayWith, placeModel, type TestGateway } from "../runtime-http/support.ts"
import { type Exposition, histogramOf, parsePrometheus, sumOf, valueOf } from "./prometheus-text.ts"
import { freePort } from "../support/free-port.ts"

describe("Prometheus metrics", () => {
  let gw: TestGateway
  let metricsPort: number
  let openai: OpenAI
  let anthropic: Anthropic

  const scrape = async (): Promise<Exposition> => {
    const res = await gw.admin("GET", "/metrics")
    expect(res.status).toBe(200)
    expect(res.headers.get("content-type")).toBe("text/plain; version=0.0.4; charset=utf-8")
    return parsePrometheus(await res.text())
  }

  beforeAll(async () => {
    metricsPort = await freePort()
    gw = await gatewayWith((config) => {
      // One slot and a slow first token: a second request has to wait.
      placeModel(config, "svc-lyra-3", [{ id: "lyra-a", capacity: 1, ttftMs: 400 }])
      config.plans.tiny = { allowanceUsd: 100, rpm: 1, tpm: 1_000_000, concurrency: 10 }
    }, { GATEWAY_METRICS_PORT: String(metricsPort), GATEWAY_RETRY_BASE_MS: "10", GATEWAY_CIRCUIT_COOLDOWN_MS: "600000" })
    openai = new OpenAI({ apiKey: gw.apiKey!, baseURL: `${gw.baseUrl}/v1`, maxRetries: 0 })
    anthropic = new Anthropic({ apiKey: gw.apiKey!, baseURL: gw.baseUrl, maxRetries: 0 })
  })
  afterAll(async () => {
    await gw?.close()
  })

  it("needs the admin token on the main port, and none on GATEWAY_METRICS_PORT", async () => {
    expect((await fetch(`${gw.baseUrl}/metrics`)).status).toBe(401)
    expect((await fetch(`${gw.baseUrl}/metrics`, { headers: { authorization: `Bearer ${gw.apiKey}` } })).status).toBe(401)
    const open = await fetch(`http://127.0.0.1:${metricsPort}/metrics`)
    expect(open.status).toBe(200)
    const exposition = parsePrometheus(await open.text())
    expect(exposition.types.get("gateway_requests_total")).toBe("counter")
    expect((await fetch(`http://127.0.0.1:${metricsPort}/admin/v1/keys`)).status).toBe(404)
  })

  it("keeps few connections open on GATEWAY_METRICS_PORT: a flood of them is closed as it comes", async () => {
    const sockets = Array.from({ length: 100 }, () => connect(metricsPort, "127.0.0.1").on("error", () => {}))
    let closed = 0
    for (const socket of sockets) socket.once("close", () => closed++)
    try {
      // A scraper needs one or two; all but a few dozen are closed at once.
      await expect.poll(() => closed, { timeout: 10_000 }).toBeGreaterThanOrEqual(60)
      expect((await gw.admin("GET", "/metrics")).status).toBe(200)
    } finally {
      for (const socket of sockets) socket.destroy()
    }
    await expect.poll(async () => (await fetch(`http://127.0.0.1:${metricsPort}/metrics`).catch(() => undefined))?.status, { timeout: 10_000 }).toBe(200)
  })

  it("counts requests, tokens, cost, waits and time to first token as traffic flows", async () => {
    const before = await scrape()
    for (let i = 0; i < 3; i++) {
      await openai.chat.completions.create({ model: "svc-pico-1", messages: [{ role: "user", content: `hello ${i}` }] })
    }
    for (let i = 0; i < 2; i++) {
      const stream = await anthropic.messages.create({ model: "atlas", max_tokens: 40, stream: true, messages: [{ role: "user", content: "say exactly: streamed" }] })
      for await (const _ of stream) { /* drain */ }
    }
    await expect(openai.chat.completions.create({ model: "no-such-model", messages: [{ role: "user", content: "x" }] })).rejects.toMatchObject({ status: 404 })
    const after = await scrape()

    const delta = (name: string, labels: Record<string, string>) => valueOf(after, name, labels) - valueOf(before, name, labels)
    expect(delta("gateway_requests_total", { surface: "chat", model: "svc-pico-1", status: "200" })).toBe(3)
    expect(delta("gateway_requests_total", { surface: "messages", model: "svc-atlas-1", status: "200" })).toBe(2)
    expect(delta("gateway_requests_total", { surface: "chat", model: "", status: "404" })).toBe(1)
    expect(after.types.get("gateway_request_duration_seconds")).toBe("histogram")

    // Histograms: a well-formed series whose count moved by the requests that went upstream.
    const count = (e: Exposition, name: string, labels: Record<string, string>) => histogramOf(e, name, labels).count
    expect(count(after, "gateway_request_duration_seconds", { surface: "chat" }) - count(before, "gateway_request_duration_seconds", { surface: "chat" })).toBe(4)
    expect(count(after, "gateway_overhead_seconds", { surface: "chat" }) - count(before, "gateway_overhead_seconds", { surface: "chat" })).toBe(3)
    expect(count(after, "gateway_queue_wait_seconds", { placement: "pico-a" }) - count(before, "gateway_queue_wait_seconds", { placement: "pico-a" })).toBe(3)
    const upstream = histogramOf(after, "gateway_upstream_duration_seconds", { placement: "pico-a", model: "svc-pico-1", outcome: "success" })
    expect(upstream.count - count(before, "gateway_upstream_duration_seconds", { placement: "pico-a", model: "svc-pico-1", outcome: "success" })).toBe(3)
    expect(upstream.sum).toBeGreaterThan(0)
    const ttft = histogramOf(after, "gateway_time_to_first_token_seconds", { model: "svc-atlas-1" })
    expect(ttft.count - count(before, "gateway_time_to_first_token_seconds", { model: "svc-atlas-1" })).toBe(2)

    // Tokens and cost by the model that served, as the usage ledger has them.
    expect(delta("gateway_tokens_total", { model: "svc-pico-1", type: "input" })).toBeGreaterThan(0)
    expect(delta("gateway_tokens_total", { model: "svc-pico-1", type: "output" })).toBeGreaterThan(0)
    const ledger = (await (await gw.admin("GET", "/admin/v1/usage")).json()) as { data: Array<{ model: string; outputTokens: number; costUsd: number }> }
    const pico = ledger.data.find((row) => row.model === "svc-pico-1")!
    expect(valueOf(after, "gateway_tokens_total", { model: "svc-pico-1", type: "output" })).toBe(pico.outputTokens)
    expect(valueOf(after, "gateway_cost_usd_total", { model: "svc-pico-1" })).toBeCloseTo(pico.costUsd, 6)
  })

  it("shows a placement's queue depth while requests wait, and the waits afterwards", async () => {
    const before = await scrape()
    const calls = [0, 1, 2].map((i) => openai.chat.completions.create({ model: "svc-lyra-3", messages: [{ role: "user", content: `queued ${i}` }] }))
    let during: Exposition | undefined
    for (let i = 0; i < 100; i++) {
      const e = await scrape()
      if (valueOf(e, "gateway_queue_depth", { placement: "lyra-a" }) >= 1) {
        during = e
        break
      }
      await new Promise((r) => setTimeout(r, 20))
    }
    expect(during).toBeDefined()
    expect(valueOf(during!, "gateway_queue_in_flight", { placement: "lyra-a" })).toBe(1)
    expect(valueOf(during!, "gateway_queue_capacity", { placement: "lyra-a" })).toBe(1)
    expect(valueOf(during!, "gateway_queue_waiting_keys", { placement: "lyra-a" })).toBe(1)
    await Promise.all(calls)
    const after = await scrape()
    expect(valueOf(after, "gateway_queue_depth", { placement: "lyra-a" })).toBe(0)
    const waits = histogramOf(after, "gateway_queue_wait_seconds", { placement: "lyra-a" })
    const earlier = histogramOf(before, "gateway_queue_wait_seconds", { placement: "lyra-a" })
    expect(waits.count - earlier.count).toBe(3)
    expect(waits.sum - earlier.sum).toBeGreaterThan(0.3) // the second waited ≥ 400 ms, the third more
  })

  it("counts failovers, failed attempts and retries, and shows the circuit that opened", async () => {
    const before = await scrape()
    expect((await gw.admin("POST", "/admin/v1/placements/atlas-a/faults", { mode: "error", status: 503 })).status).toBe(200)
    for (let i = 0; i < 3; i++) {
      const { response } = await openai.chat.completions.create({ model: "svc-atlas-1", messages: [{ role: "user", content: "say exactly: still here" }] }).withResponse()
      expect(response.headers.get("xsvc-model")).toBe("svc-atlas-1")
    }
    const after = await scrape()
    const delta = (name: string, labels: Record<string, string>) => sumOf(after, name, labels) - sumOf(before, name, labels)
    expect(delta("gateway_failovers_total", { from: "atlas-a", to: "atlas-b" })).toBe(3)
    expect(delta("gateway_upstream_retries_total", { placement: "atlas-b" })).toBe(3)
    expect(delta("gateway_upstream_duration_seconds_count", { placement: "atlas-a", outcome: "failure" })).toBe(3)
    // Three failures in a row opened atlas-a's circuit (the cooldown is long: it stays open).
    expect(valueOf(after, "gateway_circuit_state", { placement: "atlas-a", state: "open" })).toBe(1)
    expect(valueOf(after, "gateway_circuit_state", { placement: "atlas-a", state: "closed" })).toBe(0)
    expect(valueOf(after, "gateway_circuit_state", { placement: "atlas-b", state: "closed" })).toBe(1)
    await gw.admin("POST", "/admin/v1/placements/atlas-a/faults", { mode: "none" })
  })

  it("counts metering rejections, stored runs by status and the event loop", async () => {
    const before = await scrape()
    const tiny = await createKey(gw, "tiny")
    const limited = new OpenAI({ apiKey: tiny.secret, baseURL: `${gw.baseUrl}/v1`, maxRetries: 0 })
    await limited.chat.completions.create({ model: "pico", messages: [{ role: "user", content: "one" }] })
    await expect(limited.chat.completions.create({ model: "pico", messages: [{ role: "user", content: "two" }] })).rejects.toMatchObject({ status: 429 })
    const run = await fetch(`${gw.baseUrl}/v1/agent-runs`, {
      method: "POST",
      headers: { authorization: `Bearer ${gw.apiKey}`, "content-type": "application/json" },
      body: JSON.stringify({ metadata: { purpose: "metrics" } })
    })
    expect(run.status).toBe(201)
    const after = await scrape()
    expect(valueOf(after, "gateway_limit_rejections_total", { reason: "rate_limit_error" }) - valueOf(before, "gateway_limit_rejections_total", { reason: "rate_limit_error" })).toBe(1)
    expect(valueOf(after, "gateway_requests_total", { surface: "chat", model: "svc-pico-1", status: "429" })).toBe(1)
    expect(valueOf(after, "gateway_runs", { status: "running" })).toBeGreaterThanOrEqual(1)
    expect(after.types.get("gateway_event_loop_delay_p99_seconds")).toBe("gauge")
    expect(valueOf(after, "gateway_event_loop_delay_max_seconds")).toBeGreaterThanOrEqual(0)
    expect(valueOf(after, "process_resident_memory_bytes")).toBeGreaterThan(10 * 1024 * 1024)
  })
})
