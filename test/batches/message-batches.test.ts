/**
 * Anthropic's Message Batches API through the official `@anthropic-ai/sdk` against the real
 * gateway: create / retrieve / list / cancel / results / delete, the contents of every result line
 * (succeeded and errored), cancel while a request is in flight, expiry with a short window,
 * validation errors naming the field, and isolation between keys.
 */
import Anthropic from "@anthropic-ai/sdk"
import { rmSync } from "node:fs"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { embeddedDataDir, engines, inOrder } from "../support/engines.ts"
import { fastConfigEnv } from "../support/fast-config.ts"
import type { GatewayHandle } from "../support/gateway-process.ts"
import { startInProcessGateway } from "../support/in-process-gateway.ts"
import { keyFor, waitForBatch } from "./support.ts"

const ask = (customId: string, text: string, model = "svc-nova-mini") => ({
  custom_id: customId,
  params: { model, max_tokens: 64, messages: [{ role: "user" as const, content: text }] }
})

/** pico answers slowly (each request is in flight for about a second); the rest instantly. A plan with almost no allowance. */
const slowPico = (config: any) => {
  for (const p of config.models.find((m: any) => m.id === "svc-pico-1").placements) p.simulator = { ttftMs: 800, tokensPerSecond: 20 }
  config.plans.tiny = { allowanceUsd: 0.000001, rpm: 1_000_000, tpm: 1_000_000_000, concurrency: 1_000 }
}

const collect = async (client: Anthropic, id: string) => {
  const lines = []
  for await (const line of await client.messages.batches.results(id)) lines.push(line)
  return lines
}

describe.concurrent.each(engines())("Message batches ($name)", (engine) => {
  let gw: GatewayHandle
  let client: Anthropic
  let cleanup: () => Promise<void>
  beforeAll(async () => {
    const setup = await engine.setup()
    cleanup = setup.cleanup
    // One request in flight at a time, so a cancel finds requests still unclaimed.
    gw = await startInProcessGateway({ ...setup.env, ...fastConfigEnv(setup.env.GATEWAY_DATA_DIR, slowPico), GATEWAY_BATCH_CONCURRENCY: "1", GATEWAY_BATCH_POLL_MS: "50" })
    client = new Anthropic({ apiKey: gw.apiKey, baseURL: gw.baseUrl, maxRetries: 0 })
  })
  afterAll(async () => {
    await gw?.stop()
    await cleanup?.()
  })

  it("answers every request once: succeeded lines carry the message, bad ones an errored result", inOrder, async () => {
    const batch = await client.messages.batches.create({
      requests: [
        ask("first", "say exactly: one"),
        ask("second", "say exactly: two"),
        ask("unknown-model", "hi", "no-such-model"),
        { custom_id: "no-max-tokens", params: { model: "svc-nova-mini", messages: [{ role: "user", content: "hi" }] } as never },
        ask("denied-vision", "hi", "svc-pico-1") // replaced below with an image for a model without vision
      ].map((r) =>
        r.custom_id === "denied-vision"
          ? { custom_id: r.custom_id, params: { ...r.params, messages: [{ role: "user" as const, content: [{ type: "image" as const, source: { type: "base64" as const, media_type: "image/png" as const, data: "iVBORw0KGgo=" } }] }] } }
          : r
      )
    })
    expect(batch).toMatchObject({ type: "message_batch", processing_status: "in_progress", ended_at: null, cancel_initiated_at: null, archived_at: null, results_url: null })
    expect(batch.id).toMatch(/^msgbatch_/)
    expect(batch.request_counts).toEqual({ processing: 5, succeeded: 0, errored: 0, canceled: 0, expired: 0 })
    expect(new Date(batch.expires_at).getTime() - new Date(batch.created_at).getTime()).toBe(24 * 3_600_000)
    const ended = await waitForBatch(() => client.messages.batches.retrieve(batch.id), (b) => b.processing_status === "ended")
    expect(ended.request_counts).toEqual({ processing: 0, succeeded: 2, errored: 3, canceled: 0, expired: 0 })
    expect(ended.results_url).toBe(`${gw.baseUrl}/v1/messages/batches/${batch.id}/results`)
    expect(ended.ended_at).not.toBeNull()
    const lines = await collect(client, batch.id)
    expect(lines.map((l) => l.custom_id)).toEqual(["first", "second", "unknown-model", "no-max-tokens", "denied-vision"])
    const [first, second, unknown, noMax, vision] = lines
    for (const [line, text] of [[first, "one"], [second, "two"]] as const) {
      expect(line.result.type).toBe("succeeded")
      if (line.result.type !== "succeeded") continue
      expect(line.result.message).toMatchObject({ type: "message", role: "assistant", model: "svc-nova-mini", stop_reason: "end_turn" })
      expect(line.result.message.id).toMatch(/^msg_/)
      expect(line.result.message.content).toEqual([{ type: "text", text }])
      expect(line.result.message.usage.output_tokens).toBeGreaterThan(0)
    }
    for (const line of [unknown, noMax, vision]) expect(line.result.type).toBe("errored")
    const errorOf = (line: any) => line.result.error
    expect(errorOf(unknown)).toMatchObject({ type: "error", error: { type: "not_found" } })
    expect(errorOf(noMax).error).toMatchObject({ type: "invalid_request_error" })
    expect(errorOf(noMax).error.message).toMatch(/max_tokens/)
    expect(errorOf(vision).error).toMatchObject({ type: "invalid_request_error" })
  })

  it("answers large requests (params past 64 KiB read as bytes and parsed in slices; past 256 Ki characters stored staged) as small ones", inOrder, async () => {
    const filler = "context é 😀 ".repeat(8_000)
    // 300,600 characters, ~100,000 tokens (three digits a token): stored through staged_documents.
    const staged = ("1234567890".repeat(300) + " é 😀 ").repeat(100)
    const large = (customId: string, system: string) =>
      ({ custom_id: customId, params: { model: "svc-nova-mini", max_tokens: 64, system, messages: [{ role: "user" as const, content: `say exactly: ${customId}` }] } })
    const batch = await client.messages.batches.create({
      requests: [large("large", filler), ask("small", "say exactly: small"), large("staged", staged), ask("last", "say exactly: last")]
    })
    await waitForBatch(() => client.messages.batches.retrieve(batch.id), (b) => b.processing_status === "ended")
    const lines = await collect(client, batch.id)
    expect(lines.map((l) => [l.custom_id, l.result.type === "succeeded" ? l.result.message.content : l.result])).toEqual([
      ["large", [{ type: "text", text: "large" }]],
      ["small", [{ type: "text", text: "small" }]],
      ["staged", [{ type: "text", text: "staged" }]],
      ["last", [{ type: "text", text: "last" }]]
    ])
  })

  it("results of more than a page of requests come back whole, in request order", inOrder, async () => {
    // Results are read 32 rows at a time: 70 requests take three pages. Cancelled at once (on the
    // slow model), most end without running, so the batch ends in a moment.
    const batch = await client.messages.batches.create({ requests: Array.from({ length: 70 }, (_, i) => ask(`p${i}`, `say exactly: page ${i}`, "svc-pico-1")) })
    await client.messages.batches.cancel(batch.id)
    const ended = await waitForBatch(() => client.messages.batches.retrieve(batch.id), (b) => b.processing_status === "ended")
    const lines = await collect(client, batch.id)
    expect(lines.map((l) => l.custom_id)).toEqual(Array.from({ length: 70 }, (_, i) => `p${i}`))
    expect(lines.filter((l) => l.result.type === "canceled")).toHaveLength(ended.request_counts.canceled)
    expect(ended.request_counts.canceled).toBeGreaterThan(32)
    for (const line of lines.filter((l) => l.result.type === "succeeded")) {
      expect(line.result.type === "succeeded" && line.result.message.content).toEqual([{ type: "text", text: `page ${line.custom_id.slice(1)}` }])
    }
  })

  it("cancel mid-batch: the request in flight finishes, the unclaimed ones end canceled", inOrder, async () => {
    const batch = await client.messages.batches.create({ requests: Array.from({ length: 6 }, (_, i) => ask(`slow-${i}`, `say exactly: slow ${i}`, "svc-pico-1")) })
    // Wait until the first request is claimed (in flight on the single worker).
    await waitForBatch(() => client.messages.batches.retrieve(batch.id), () => true)
    const canceling = await client.messages.batches.cancel(batch.id)
    expect(["canceling", "ended"]).toContain(canceling.processing_status)
    expect(canceling.cancel_initiated_at).not.toBeNull()
    const ended = await waitForBatch(() => client.messages.batches.retrieve(batch.id), (b) => b.processing_status === "ended")
    const counts = ended.request_counts
    expect(counts.processing).toBe(0)
    expect(counts.succeeded + counts.canceled).toBe(6)
    expect(counts.canceled).toBeGreaterThanOrEqual(4)
    expect(counts.succeeded).toBeLessThanOrEqual(2)
    const lines = await collect(client, batch.id)
    expect(lines.map((l) => l.custom_id)).toEqual(Array.from({ length: 6 }, (_, i) => `slow-${i}`))
    expect(lines.filter((l) => l.result.type === "canceled")).toHaveLength(counts.canceled)
    for (const line of lines.filter((l) => l.result.type === "succeeded")) {
      expect(line.result.type === "succeeded" && line.result.message.content).toEqual([{ type: "text", text: `slow ${line.custom_id.slice(5)}` }])
    }
    // A second cancel changes nothing.
    expect((await client.messages.batches.cancel(batch.id)).request_counts).toEqual(counts)
  })

  it("lists newest first with limit, after_id and before_id; deletes only ended batches", inOrder, async () => {
    const a = await client.messages.batches.create({ requests: [ask("a", "hi")] })
    const b = await client.messages.batches.create({ requests: [ask("b", "hi")] })
    const c = await client.messages.batches.create({ requests: [ask("c", "hi")] })
    const page = await client.messages.batches.list({ limit: 2 })
    expect(page.data.map((x) => x.id)).toEqual([c.id, b.id])
    expect(page.has_more).toBe(true)
    expect(page.first_id).toBe(c.id)
    expect(page.last_id).toBe(b.id)
    const after = await client.messages.batches.list({ limit: 2, after_id: b.id })
    expect(after.data.map((x) => x.id)[0]).toBe(a.id)
    const before = await client.messages.batches.list({ limit: 1, before_id: b.id })
    expect(before.data.map((x) => x.id)).toEqual([c.id])
    const slow = await client.messages.batches.create({ requests: [ask("s", "hi", "svc-pico-1")] })
    const busy = await client.messages.batches.delete(slow.id).catch((e) => e)
    expect(busy).toBeInstanceOf(Anthropic.APIError)
    expect(busy.status).toBe(400)
    await waitForBatch(() => client.messages.batches.retrieve(a.id), (x) => x.processing_status === "ended")
    expect(await client.messages.batches.delete(a.id)).toEqual({ id: a.id, type: "message_batch_deleted" })
    expect((await client.messages.batches.retrieve(a.id).catch((e) => e)).status).toBe(404)
    await waitForBatch(() => client.messages.batches.retrieve(slow.id), (x) => x.processing_status === "ended")
  })

  it("refuses a bad envelope with 400 naming the field", inOrder, async () => {
    const cases: ReadonlyArray<[unknown, string]> = [
      [{ requests: [] }, "requests"],
      [{ requests: Array.from({ length: 1001 }, (_, i) => ask(`r${i}`, "hi")) }, "requests"],
      [{ requests: [ask("bad id!", "hi")] }, "requests[0].custom_id"],
      [{ requests: [ask("dup", "hi"), ask("dup", "hi")] }, "requests[1].custom_id"],
      [{ requests: [{ custom_id: "x", params: "nope" }] }, "requests[0].params"],
      [{ requests: [{ custom_id: "x", params: { ...ask("x", "hi").params, stream: true } }] }, "requests[0].params.stream"]
    ]
    for (const [body, param] of cases) {
      const res = await fetch(`${gw.baseUrl}/v1/messages/batches`, {
        method: "POST",
        headers: { "x-api-key": gw.apiKey!, "content-type": "application/json" },
        body: JSON.stringify(body)
      })
      expect(res.status, param).toBe(400)
      const error = (await res.json()) as any
      expect(error.type).toBe("error")
      expect(error.error.type).toBe("invalid_request_error")
      expect(error.error.message).toContain(param)
    }
    const results = await fetch(`${gw.baseUrl}/v1/messages/batches/msgbatch_nope/results`, { headers: { "x-api-key": gw.apiKey! } })
    expect(results.status).toBe(404)
  })

  it("a spent allowance errors the lines with allowance_exhausted; the batch still ends", inOrder, async () => {
    const poor = new Anthropic({ apiKey: await keyFor(gw, "poor", "tiny"), baseURL: gw.baseUrl, maxRetries: 0 })
    const batch = await poor.messages.batches.create({ requests: [ask("p1", "hi"), ask("p2", "hi"), ask("p3", "hi")] })
    const ended = await waitForBatch(() => poor.messages.batches.retrieve(batch.id), (b) => b.processing_status === "ended")
    expect(ended.request_counts).toEqual({ processing: 0, succeeded: 0, errored: 3, canceled: 0, expired: 0 })
    const lines = await collect(poor, batch.id)
    for (const line of lines) expect((line.result as any).error).toMatchObject({ type: "error", error: { type: "allowance_exhausted" } })
  })

  it("isolates keys: another key's batch is 404 everywhere and absent from its list", inOrder, async () => {
    const batch = await client.messages.batches.create({ requests: [ask("mine", "hi")] })
    await waitForBatch(() => client.messages.batches.retrieve(batch.id), (x) => x.processing_status === "ended")
    const other = new Anthropic({ apiKey: await keyFor(gw, "other"), baseURL: gw.baseUrl, maxRetries: 0 })
    for (
      const attempt of [
        () => other.messages.batches.retrieve(batch.id),
        () => other.messages.batches.cancel(batch.id),
        () => other.messages.batches.delete(batch.id),
        () => fetch(`${gw.baseUrl}/v1/messages/batches/${batch.id}/results`, { headers: { "x-api-key": other.apiKey! } }).then((r) => {
          if (r.status !== 200) throw { status: r.status }
        })
      ] as ReadonlyArray<() => Promise<unknown>>
    ) {
      const error = await attempt().then(() => undefined, (e) => e)
      expect(error?.status).toBe(404)
    }
    expect((await other.messages.batches.list()).data).toEqual([])
    expect((await client.messages.batches.retrieve(batch.id)).id).toBe(batch.id)
  })
})

describe("Message batch expiry (embedded)", () => {
  const dir = embeddedDataDir()
  let gw: GatewayHandle
  beforeAll(async () => {
    gw = await startInProcessGateway({
      GATEWAY_DATA_DIR: dir,
      ...fastConfigEnv(dir, slowPico),
      GATEWAY_BATCH_CONCURRENCY: "1",
      GATEWAY_BATCH_POLL_MS: "50",
      GATEWAY_BATCH_WINDOW_MS: "1500"
    })
  })
  afterAll(async () => {
    await gw?.stop()
    rmSync(dir, { recursive: true, force: true })
  })

  it("requests not done by expires_at end expired; the batch ends", async () => {
    const client = new Anthropic({ apiKey: gw.apiKey, baseURL: gw.baseUrl, maxRetries: 0 })
    const batch = await client.messages.batches.create({ requests: Array.from({ length: 8 }, (_, i) => ask(`e${i}`, "say exactly: late", "svc-pico-1")) })
    expect(new Date(batch.expires_at).getTime() - new Date(batch.created_at).getTime()).toBe(1500)
    const ended = await waitForBatch(() => client.messages.batches.retrieve(batch.id), (b) => b.processing_status === "ended", 30_000)
    const counts = ended.request_counts
    expect(counts.expired).toBeGreaterThanOrEqual(5)
    expect(counts.succeeded + counts.expired).toBe(8)
    const lines = await collect(client, batch.id)
    expect(lines.map((l) => l.custom_id)).toEqual(Array.from({ length: 8 }, (_, i) => `e${i}`))
    expect(lines.filter((l) => l.result.type === "expired")).toHaveLength(counts.expired)
  })
})
