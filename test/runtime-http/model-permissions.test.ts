/**
 * A key's model patterns bound continuity (issue #10.4): a key limited to `svc-pico-*` is never
 * served by pico's equivalent `svc-nova-mini` — not when pico fails, not when pico is full, not in
 * an agent run — and its reservation is priced at the models it may use only.
 */
import OpenAI from "openai"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { gatewayWith, placeModel, post, queueOf, type TestGateway, untilCircuitsNotOpen, untilQueue } from "./support.ts"

describe("model permissions through continuity", () => {
  let gw: TestGateway
  let picoOnly: string
  let everything: string
  const fault = async (placementId: string, body: Record<string, unknown>) => {
    const res = await gw.admin("POST", `/admin/v1/placements/${placementId}/faults`, body)
    expect(res.status).toBe(200)
  }
  const keyWith = async (body: Record<string, unknown>) => {
    const res = await gw.admin("POST", "/admin/v1/keys", body)
    expect(res.status).toBe(201)
    return ((await res.json()) as { key: string }).key
  }
  beforeAll(async () => {
    gw = await gatewayWith((config) => {
      // One slow slot on pico, so a held call keeps it full; nova-mini is its free equivalent.
      placeModel(config, "svc-pico-1", [{ id: "pico-a", capacity: 1, ttftMs: 1_500 }], ["svc-nova-mini"])
      placeModel(config, "svc-nova-mini", [{ id: "nova-a", capacity: 8 }], ["svc-pico-1"])
      config.plans.small = { allowanceUsd: 1, rpm: 100_000, tpm: 100_000_000, concurrency: 100 }
    }, { GATEWAY_RETRY_BASE_MS: "10", GATEWAY_CIRCUIT_COOLDOWN_MS: "100" })
    picoOnly = await keyWith({ name: "pico only", plan: "small", permissions: { models: ["svc-pico-*"] } })
    everything = await keyWith({ name: "all models", plan: "small" })
  })
  afterAll(async () => {
    await gw?.close()
  })

  it("asking for the equivalent directly is 403 (the baseline the rest must match)", async () => {
    const res = await post(gw, "/v1/chat/completions", picoOnly, { model: "svc-nova-mini", messages: [{ role: "user", content: "hi" }] })
    expect(res.status).toBe(403)
  })

  it("a failing model does not hand the key's request to a model it may not use", async () => {
    await fault("pico-a", { mode: "error", status: 500 })
    try {
      const openai = new OpenAI({ apiKey: picoOnly, baseURL: `${gw.baseUrl}/v1`, maxRetries: 0 })
      const error = await openai.chat.completions.create({ model: "svc-pico-1", messages: [{ role: "user", content: "hi" }] }).catch((e) => e)
      expect(error).toBeInstanceOf(OpenAI.APIError)
      expect(error.status).toBeGreaterThanOrEqual(500)
      expect(error.error.type).toBe("api_error")
      // The same request from a key without limits is covered by the equivalent, as before.
      const covered = await post(gw, "/v1/chat/completions", everything, { model: "svc-pico-1", messages: [{ role: "user", content: "hi" }] })
      expect(covered.status).toBe(200)
      expect(covered.headers.get("xsvc-model")).toBe("svc-nova-mini")
    } finally {
      await fault("pico-a", { mode: "none" })
      await untilCircuitsNotOpen(gw, ["pico-a"]) // the open circuit reaches its half-open probe
    }
  })

  it("a full model makes the key wait for it instead of spilling to a model it may not use", async () => {
    // Probe until pico's circuit is closed again after the previous test.
    const probe = await post(gw, "/v1/chat/completions", everything, { model: "svc-pico-1", messages: [{ role: "user", content: "hi" }] })
    expect(probe.status).toBe(200)
    const holder = post(gw, "/v1/chat/completions", everything, { model: "svc-pico-1", messages: [{ role: "user", content: "hold the slot" }] })
    await untilQueue(gw, "pico-a", (q) => q.inUse >= 1)
    expect((await queueOf(gw, "pico-a")).inUse).toBe(1)
    const limited = await post(gw, "/v1/chat/completions", picoOnly, { model: "svc-pico-1", messages: [{ role: "user", content: "hi" }] })
    expect(limited.status).toBe(200)
    expect(limited.headers.get("xsvc-model")).toBe("svc-pico-1")
    expect(((await limited.json()) as { model: string }).model).toBe("svc-pico-1")
    expect((await holder).status).toBe(200)
  })

  it("an agent run of the key is served only by models the key may use", async () => {
    const holder = post(gw, "/v1/chat/completions", everything, { model: "svc-pico-1", messages: [{ role: "user", content: "hold the slot" }] })
    await untilQueue(gw, "pico-a", (q) => q.inUse >= 1)
    const created = await post(gw, "/v1/agent-runs", picoOnly, { model: "svc-pico-1", input: "say exactly: done" })
    expect(created.status).toBe(202)
    const runId = ((await created.json()) as { run: { id: string } }).run.id
    let run: { status: string } = { status: "running" }
    for (let i = 0; i < 200 && (run.status === "running" || run.status === "requires_action"); i++) {
      await new Promise((r) => setTimeout(r, 50))
      run = ((await (await fetch(`${gw.baseUrl}/v1/agent-runs/${runId}`, { headers: { authorization: `Bearer ${picoOnly}` } })).json()) as { run: typeof run }).run
    }
    expect(run.status).toBe("completed")
    const events = await (await fetch(`${gw.baseUrl}/v1/agent-runs/${runId}/events`, { headers: { authorization: `Bearer ${picoOnly}` } })).text()
    const completed = events.split("\n").filter((l) => l.startsWith("data: ")).map((l) => JSON.parse(l.slice(6))).find((e) => e.type === "node.completed")
    expect(completed.model).toBe("svc-pico-1")
    await holder
  })

  it("the reservation is priced at the models the key may use", async () => {
    // A stream's allowance header is the figure right after the reservation. 10,000 output
    // tokens reserve $0.002 at pico's output rate, $0.006 at nova-mini's.
    const reserve = async (key: string) => {
      const res = await post(gw, "/v1/chat/completions", key, { model: "svc-pico-1", max_tokens: 10_000, stream: true, messages: [{ role: "user", content: "hi" }] })
      expect(res.status).toBe(200)
      const remaining = Number(res.headers.get("xsvc-allowance-remaining"))
      await res.text()
      return remaining
    }
    const spentBefore = (key: string) => post(gw, "/v1/chat/completions", key, { model: "svc-pico-1", max_tokens: 1, messages: [{ role: "user", content: "hi" }] })
      .then((r) => Number(r.headers.get("xsvc-allowance-remaining")))
    const limitedBase = await spentBefore(picoOnly)
    const limitedReserved = limitedBase - (await reserve(picoOnly))
    const fullBase = await spentBefore(everything)
    const fullReserved = fullBase - (await reserve(everything))
    expect(limitedReserved).toBeGreaterThan(0.0019)
    expect(limitedReserved).toBeLessThan(0.0025)
    expect(fullReserved).toBeGreaterThan(0.0059)
  })
})
