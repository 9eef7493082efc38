/**
 * Metering over HTTP with the official SDKs: the allowance headers, a hard allowance that concurrent
 * calls cannot overshoot, exhaustion lifted by a plan change, prepaid credits and their top-up, each
 * rate limit with its headers, and the usage ledger summed by model.
 */
import Anthropic from "@anthropic-ai/sdk"
import OpenAI from "openai"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { createKey, gatewayWith, placeModel, post, type TestGateway, untilQueue } from "./support.ts"

const PLANS = {
  tiny: { allowanceUsd: 0.01, rpm: 100_000, tpm: 100_000_000, concurrency: 100 },
  big: { allowanceUsd: 100, rpm: 100_000, tpm: 100_000_000, concurrency: 100 },
  prepaid: { allowanceUsd: 0, rpm: 100_000, tpm: 100_000_000, concurrency: 100, prepaid: true },
  rpm3: { allowanceUsd: 100, rpm: 3, tpm: 100_000_000, concurrency: 100 },
  tpm1k: { allowanceUsd: 100, rpm: 100_000, tpm: 1_000, concurrency: 100 },
  single: { allowanceUsd: 100, rpm: 100_000, tpm: 100_000_000, concurrency: 1 }
}

const secondsToNextMonth = () => {
  const now = new Date()
  return (Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + 1, 1) - now.getTime()) / 1000
}

describe("metering over HTTP", () => {
  let gw: TestGateway
  const chat = (key: string, extra: Record<string, unknown> = {}) =>
    post(gw, "/v1/chat/completions", key, { model: "svc-atlas-1", max_tokens: 100, messages: [{ role: "user", content: "say exactly: ok" }], ...extra })
  beforeAll(async () => {
    gw = await gatewayWith((config) => {
      Object.assign(config.plans, PLANS)
      placeModel(config, "svc-lyra-3", [{ id: "lyra-a", capacity: 4, ttftMs: 800 }])
    })
  })
  afterAll(async () => {
    await gw?.close()
  })

  it("sends xsvc-allowance-remaining and the x-ratelimit-* headers on every metered response", async () => {
    const key = await createKey(gw, "big")
    const client = new OpenAI({ apiKey: key.secret, baseURL: `${gw.baseUrl}/v1`, maxRetries: 0 })
    const first = await client.chat.completions.create({ model: "svc-atlas-1", max_tokens: 100, messages: [{ role: "user", content: "hi" }] }).withResponse()
    const h = first.response.headers
    const remaining1 = Number(h.get("xsvc-allowance-remaining"))
    expect(remaining1).toBeLessThan(100)
    expect(remaining1).toBeGreaterThan(99.9)
    expect(h.get("x-ratelimit-limit-requests")).toBe("100000")
    expect(h.get("x-ratelimit-remaining-requests")).toBe("99999")
    expect(h.get("x-ratelimit-reset-requests")).toMatch(/^\d+(\.\d+)?(ms|s)$/)
    expect(h.get("x-ratelimit-limit-tokens")).toBe("100000000")
    expect(Number(h.get("x-ratelimit-remaining-tokens"))).toBeLessThan(100_000_000)
    expect(h.get("x-ratelimit-reset-tokens")).toMatch(/^\d+(\.\d+)?(ms|s)$/)
    const streamed = await post(gw, "/v1/messages", key.secret, { model: "svc-atlas-1", max_tokens: 100, stream: true, messages: [{ role: "user", content: "hi" }] })
    expect(Number(streamed.headers.get("xsvc-allowance-remaining"))).toBeLessThan(remaining1)
    await streamed.text()
    const embedded = await post(gw, "/v1/embeddings", key.secret, { model: "svc-embed-small", input: "hello" })
    expect(embedded.status).toBe(200)
    expect(embedded.headers.get("xsvc-allowance-remaining")).not.toBeNull()
    expect(embedded.headers.get("x-ratelimit-limit-requests")).toBe("100000")
  })

  it("never lets concurrent calls spend past the allowance; exhaustion is a 429 until a bigger plan lifts it at once", async () => {
    const key = await createKey(gw, "tiny")
    const results = await Promise.all(Array.from({ length: 24 }, () => chat(key.secret)))
    const statuses = results.map((r) => r.status)
    expect(statuses.filter((s) => s === 200).length).toBeGreaterThan(0)
    expect(statuses.filter((s) => s === 429).length).toBeGreaterThan(0)
    expect(statuses.every((s) => s === 200 || s === 429)).toBe(true)
    const usage = (await (await gw.admin("GET", `/admin/v1/usage?keyId=${key.id}`)).json()) as { totalCostUsd: string; data: Array<{ model: string; requests: number }> }
    expect(Number(usage.totalCostUsd)).toBeLessThanOrEqual(0.01)
    expect(usage.data).toEqual([expect.objectContaining({ model: "svc-atlas-1", requests: statuses.filter((s) => s === 200).length })])

    const refused = results.find((r) => r.status === 429)!
    const body = (await refused.json()) as { error: { type: string; message: string } }
    expect(body.error.type).toBe("allowance_exhausted")
    expect(refused.headers.get("x-should-retry")).toBe("false")
    expect(Math.abs(Number(refused.headers.get("retry-after")) - secondsToNextMonth())).toBeLessThan(30)

    // How many of the concurrent calls fit depends on how many settled meanwhile: spend the rest.
    for (let i = 0; i < 10 && (await chat(key.secret)).status === 200; i++);
    // The SDKs surface it as a RateLimitError and do not retry it (x-should-retry: false).
    const anthropic = new Anthropic({ apiKey: key.secret, baseURL: gw.baseUrl, maxRetries: 3 })
    const error = await anthropic.messages.create({ model: "svc-atlas-1", max_tokens: 100, messages: [{ role: "user", content: "hi" }] }).catch((e) => e)
    expect(error, JSON.stringify(error).slice(0, 500)).toBeInstanceOf(Anthropic.RateLimitError)
    expect(error.error).toMatchObject({ type: "error", error: { type: "allowance_exhausted" } })

    expect((await gw.admin("PATCH", `/admin/v1/keys/${key.id}`, { plan: "big" })).status).toBe(200)
    const lifted = await chat(key.secret)
    expect(lifted.status).toBe(200)
    expect(Number(lifted.headers.get("xsvc-allowance-remaining"))).toBeGreaterThan(99)
  })

  it("refuses a prepaid key at zero with credits_exhausted and no retry-after; a top-up lifts it at once", async () => {
    const key = await createKey(gw, "prepaid")
    const refused = await chat(key.secret)
    expect(refused.status).toBe(429)
    expect(((await refused.json()) as { error: { type: string } }).error.type).toBe("credits_exhausted")
    expect(refused.headers.get("retry-after")).toBeNull()
    expect(refused.headers.get("x-should-retry")).toBe("false")

    const bad = await gw.admin("POST", `/admin/v1/keys/${key.id}/credits`, { amountUsd: "lots" })
    expect(bad.status).toBe(400)
    expect(((await bad.json()) as { error: { message: string } }).error.message).toContain("amountUsd")
    expect((await gw.admin("POST", `/admin/v1/keys/key_nope/credits`, { amountUsd: 1 })).status).toBe(404)
    const topUp = await gw.admin("POST", `/admin/v1/keys/${key.id}/credits`, { amountUsd: 1 })
    expect(topUp.status).toBe(201)
    expect(await topUp.json()).toMatchObject({ keyId: key.id, amountUsd: 1 })
    const served = await chat(key.secret)
    expect(served.status).toBe(200)
    const left = Number(served.headers.get("xsvc-allowance-remaining"))
    expect(left).toBeLessThan(1)
    expect(left).toBeGreaterThan(0.99)
  })

  it("limits requests per minute with rate_limit_error, retry-after and the request headers", async () => {
    const key = await createKey(gw, "rpm3")
    for (let i = 0; i < 3; i++) expect((await chat(key.secret)).status).toBe(200)
    const limited = await chat(key.secret)
    expect(limited.status).toBe(429)
    expect(((await limited.json()) as { error: { type: string; message: string } }).error).toMatchObject({ type: "rate_limit_error" })
    expect(Number(limited.headers.get("retry-after"))).toBeGreaterThanOrEqual(1)
    expect(limited.headers.get("x-should-retry")).toBeNull()
    expect(limited.headers.get("x-ratelimit-limit-requests")).toBe("3")
    expect(limited.headers.get("x-ratelimit-remaining-requests")).toBe("0")
  })

  it("limits tokens per minute (input estimate + output ceiling)", async () => {
    const key = await createKey(gw, "tpm1k")
    const first = await chat(key.secret, { max_tokens: 600 })
    expect(first.status).toBe(200)
    expect(Number(first.headers.get("x-ratelimit-remaining-tokens"))).toBeLessThan(400)
    const limited = await chat(key.secret, { max_tokens: 600 })
    expect(limited.status).toBe(429)
    expect(((await limited.json()) as { error: { type: string; message: string } }).error.message).toContain("tokens per minute")
    expect(limited.headers.get("x-ratelimit-limit-tokens")).toBe("1000")
    expect(Number(limited.headers.get("retry-after"))).toBeGreaterThanOrEqual(1)
  })

  it("limits concurrent requests", async () => {
    const key = await createKey(gw, "single")
    const slow = post(gw, "/v1/chat/completions", key.secret, { model: "svc-lyra-3", messages: [{ role: "user", content: "slow" }] })
    // Its call is on the model (so past admission, holding the key's one concurrency slot).
    await untilQueue(gw, "lyra-a", (q) => q.inUse === 1)
    const limited = await chat(key.secret)
    expect(limited.status).toBe(429)
    expect(((await limited.json()) as { error: { message: string } }).error.message).toContain("concurrent requests")
    expect((await slow).status).toBe(200)
    expect((await chat(key.secret)).status).toBe(200) // the slot came back
  })

  it("sums the usage ledger by model for a key and a time window", async () => {
    const key = await createKey(gw, "big")
    for (const model of ["svc-atlas-1", "svc-atlas-1", "svc-nova-mini"]) {
      expect((await chat(key.secret, { model })).status).toBe(200)
    }
    const res = await gw.admin("GET", `/admin/v1/usage?keyId=${key.id}`)
    expect(res.status).toBe(200)
    const usage = (await res.json()) as { keyId: string; data: Array<{ model: string; requests: number; inputTokens: number; outputTokens: number; costUsd: string }>; totalCostUsd: string }
    expect(usage.keyId).toBe(key.id)
    const byModel = Object.fromEntries(usage.data.map((row) => [row.model, row]))
    expect(byModel["svc-atlas-1"].requests).toBe(2)
    expect(byModel["svc-nova-mini"].requests).toBe(1)
    expect(byModel["svc-atlas-1"].outputTokens).toBeGreaterThan(0)
    // Price = usage × list rates: atlas $3 in / $15 out per million tokens.
    const atlas = byModel["svc-atlas-1"]
    expect(Number(atlas.costUsd)).toBeCloseTo((atlas.inputTokens * 3 + atlas.outputTokens * 15) / 1e6, 5)
    expect(Number(usage.totalCostUsd)).toBeCloseTo(usage.data.reduce((sum, row) => sum + Number(row.costUsd), 0), 6)

    const past = await gw.admin("GET", `/admin/v1/usage?keyId=${key.id}&from=2020-01-01T00:00:00Z&to=2020-02-01T00:00:00Z`)
    expect(((await past.json()) as { data: Array<unknown> }).data).toEqual([])
    const bad = await gw.admin("GET", `/admin/v1/usage?from=yesterday`)
    expect(bad.status).toBe(400)
    expect(((await bad.json()) as { error: { message: string } }).error.message).toContain("from")
    expect((await gw.admin("GET", `/admin/v1/usage?keyId=key_nope`)).status).toBe(404)
  })
})

describe("GATEWAY_METERING=off", () => {
  let gw: TestGateway
  beforeAll(async () => {
    gw = await gatewayWith((config) => {
      config.plans.tiny = { allowanceUsd: 0.000001, rpm: 1, tpm: 10, concurrency: 1 }
    }, { GATEWAY_METERING: "off" })
  })
  afterAll(async () => {
    await gw?.close()
  })

  it("checks no limit and sends no limit headers, but still records usage", async () => {
    const key = await createKey(gw, "tiny")
    const responses = await Promise.all(Array.from({ length: 5 }, () =>
      post(gw, "/v1/chat/completions", key.secret, { model: "svc-atlas-1", max_tokens: 100, messages: [{ role: "user", content: "hi" }] })))
    expect(responses.map((r) => r.status)).toEqual([200, 200, 200, 200, 200])
    expect(responses[0].headers.get("x-ratelimit-limit-requests")).toBeNull()
    expect(responses[0].headers.get("xsvc-allowance-remaining")).toBeNull()
    const usage = (await (await gw.admin("GET", `/admin/v1/usage?keyId=${key.id}`)).json()) as { data: Array<{ requests: number }>; totalCostUsd: string }
    expect(usage.data[0].requests).toBe(5)
    expect(Number(usage.totalCostUsd)).toBeGreaterThan(0)
  })
})
