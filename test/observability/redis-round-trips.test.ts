/**
 * The Redis round trips a request makes before its upstream call, read from the gateway's own
 * `gateway_redis_round_trips_total{operation}` (every `RedisClient.use` is one round trip: a
 * command, a script or a pipeline). Admission is metering (rate limits and the allowance hold, one
 * script) plus one capacity-queue script that reads the circuit and takes the slot — two round
 * trips whether the model has one placement or a failover candidate, and an open circuit is
 * still skipped.
 */
import { randomBytes } from "node:crypto"
import OpenAI from "openai"
import { Effect } from "effect"
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest"
import { dropPrefix } from "../coordination/support.ts"
import { gatewayWith, placeModel, queueOf, type TestGateway } from "../runtime-http/support.ts"
import { parsePrometheus } from "./prometheus-text.ts"

const { redisUrl } = inject("services")

/** Operations that run on the request's way to the upstream (the rest settle afterwards or run in the background). */
const ADMISSION = new Set(["gate", "gateAndReserve", "budgetReserve", "circuit", "cqEnqueue", "cqPosition"])

describe.runIf(redisUrl !== null)("Redis round trips on the admission path", () => {
  let gw: TestGateway
  let openai: OpenAI
  const prefix = `gwtest:${randomBytes(5).toString("hex")}:`

  const roundTrips = async (): Promise<Map<string, number>> => {
    const res = await gw.admin("GET", "/metrics")
    expect(res.status).toBe(200)
    const exposition = parsePrometheus(await res.text())
    const counts = new Map<string, number>()
    for (const sample of exposition.samples) {
      if (sample.name === "gateway_redis_round_trips_total") counts.set(sample.labels.operation!, sample.value)
    }
    return counts
  }

  /** What one request added, by operation, among the admission operations. */
  const admissionOf = async (model: string) => {
    const before = await roundTrips()
    const answer = await openai.chat.completions.create({ model, messages: [{ role: "user", content: "say exactly: ok" }] })
    expect(answer.choices[0]!.message.content).toBe("ok")
    const after = await roundTrips()
    const added: Record<string, number> = {}
    for (const [operation, count] of after) {
      const delta = count - (before.get(operation) ?? 0)
      if (ADMISSION.has(operation) && delta > 0) added[operation] = delta
    }
    return added
  }

  beforeAll(async () => {
    gw = await gatewayWith((config) => {
      placeModel(config, "svc-lyra-3", [{ id: "lyra-only", capacity: 4 }])
      placeModel(config, "svc-atlas-1", [{ id: "atlas-x", capacity: 4 }, { id: "atlas-y", capacity: 4 }])
    }, {
      REDIS_URL: redisUrl!,
      GATEWAY_REDIS_PREFIX: prefix,
      GATEWAY_RETRY_BASE_MS: "10",
      GATEWAY_CIRCUIT_COOLDOWN_MS: "600000"
    })
    openai = new OpenAI({ apiKey: gw.apiKey!, baseURL: `${gw.baseUrl}/v1`, maxRetries: 0 })
  })
  afterAll(async () => {
    await gw?.close()
    await Effect.runPromise(dropPrefix(redisUrl!, prefix))
  })

  it("one placement: metering in one script, the slot in one script", async () => {
    await admissionOf("svc-lyra-3") // warm: scripts loaded, key cached
    expect(await admissionOf("svc-lyra-3")).toEqual({ gateAndReserve: 1, cqEnqueue: 1 })
  })

  it("two placements: the circuit is read inside the enqueue, not before it", async () => {
    await admissionOf("svc-atlas-1")
    expect(await admissionOf("svc-atlas-1")).toEqual({ gateAndReserve: 1, cqEnqueue: 1 })
  })

  it("an open circuit on the first placement is skipped: the request is served by the second", async () => {
    // Fail the first placement until its circuit opens (failover serves meanwhile); the cooldown is long.
    await gw.admin("POST", "/admin/v1/placements/atlas-x/faults", { mode: "error", status: 500 })
    for (let i = 0; i < 10 && (await queueOf(gw, "atlas-x")).circuit !== "open"; i++) {
      await openai.chat.completions.create({ model: "svc-atlas-1", messages: [{ role: "user", content: "hi" }], max_tokens: 8 })
    }
    await gw.admin("POST", "/admin/v1/placements/atlas-x/faults", { mode: "none" })
    expect((await queueOf(gw, "atlas-x")).circuit).toBe("open")
    const added = await admissionOf("svc-atlas-1")
    // The open placement answers "open" without enqueueing (one script), the healthy one takes the slot.
    expect(added).toEqual({ gateAndReserve: 1, cqEnqueue: 2 })
    expect(await queueOf(gw, "atlas-x")).toMatchObject({ circuit: "open", inUse: 0, waiting: 0 })
  })
})
