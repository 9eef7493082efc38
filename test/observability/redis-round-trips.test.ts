/**
 * The Redis round trips a request makes before its upstream call, read from the gateway's own
 * `gateway_redis_round_trips_total{operation}` (every `RedisClient.use` is one round trip: a
 * command, a script or a pipeline). Admission is metering (rate limits and the allowance hold, one
 * script) plus one capacity-queue script that reads the circuit and takes the slot — two round
 * trips whether the model has one placement or a failover candidate, and an open circuit is
 * still skipped. And the two leave together, as one command (the turn's scripts are bundled:
 * coordination/script-bundle.ts): the slot's enqueue goes out before the metering script is
 * answered (it takes a slot only with the admission ticket that script leaves), so admission costs
 * one round trip — watched from a proxy between the gateway and Redis.
 */
import { randomBytes } from "node:crypto"
import { createServer, connect, type Server, type Socket } from "node:net"
import { Redis } from "ioredis"
import OpenAI from "openai"
import { Effect } from "effect"
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest"
import { dropPrefix } from "../coordination/support.ts"
import { gatewayWith, placeModel, queueOf, type TestGateway } from "../runtime-http/support.ts"
import { parsePrometheus } from "./prometheus-text.ts"


/**
 * A TCP proxy in front of Redis that passes everything through, until `holdReplies`: from then on
 * Redis's answers are held back (up to `maxHoldMs`) until a command carrying `until` arrives from
 * the gateway. What the gateway sent while nothing came back is the test's evidence.
 */
const startRedisProxy = async (target: URL) => {
  const sockets = new Set<Socket>()
  let hold: { until: string; sent: Array<string>; held: Array<() => void>; release: () => void } | undefined
  const server: Server = createServer((client) => {
    const upstream = connect(Number(target.port || 6379), target.hostname)
    sockets.add(client).add(upstream)
    client.on("data", (data) => {
      upstream.write(data)
      if (hold === undefined) return
      hold.sent.push(data.toString("latin1"))
      if (data.includes(hold.until)) hold.release()
    })
    upstream.on("data", (data) => {
      if (hold === undefined) client.write(data)
      else hold.held.push(() => client.write(data))
    })
    for (const [a, b] of [[client, upstream], [upstream, client]] as const) {
      a.on("error", () => b.destroy())
      a.on("close", () => b.destroy())
    }
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const port = (server.address() as { port: number }).port
  return {
    url: `redis://127.0.0.1:${port}`,
    /** Holds Redis's answers until a command containing `until` is sent; resolves with what was sent meanwhile. */
    holdReplies: (until: string, maxHoldMs: number) =>
      new Promise<{ readonly sent: string; readonly released: "seen" | "timeout" }>((resolve) => {
        const state = {
          until,
          sent: [] as Array<string>,
          held: [] as Array<() => void>,
          release: () => finish("seen")
        }
        const timer = setTimeout(() => finish("timeout"), maxHoldMs)
        const finish = (released: "seen" | "timeout") => {
          if (hold !== state) return
          clearTimeout(timer)
          hold = undefined
          for (const write of state.held) write()
          resolve({ sent: state.sent.join(""), released })
        }
        hold = state
      }),
    close: () => {
      for (const socket of sockets) socket.destroy()
      return new Promise<void>((resolve) => server.close(() => resolve()))
    }
  }
}

const { redisUrl } = inject("services")

/** Operations that run on the request's way to the upstream (the rest settle afterwards or run in the background). */
const ADMISSION = new Set(["gate", "gateAndReserve", "budgetReserve", "circuit", "cqEnqueue", "cqPosition"])

describe.runIf(redisUrl !== null)("Redis round trips on the admission path", () => {
  let gw: TestGateway
  let openai: OpenAI
  let proxy: Awaited<ReturnType<typeof startRedisProxy>>
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
    proxy = await startRedisProxy(new URL(redisUrl!))
    gw = await gatewayWith((config) => {
      placeModel(config, "svc-lyra-3", [{ id: "lyra-only", capacity: 4 }])
      placeModel(config, "svc-atlas-1", [{ id: "atlas-x", capacity: 4 }, { id: "atlas-y", capacity: 4 }])
      config.plans.tiny = { allowanceUsd: 5, rpm: 1, tpm: 100_000_000, concurrency: 100 }
    }, {
      REDIS_URL: proxy.url,
      GATEWAY_REDIS_PREFIX: prefix,
      GATEWAY_RETRY_BASE_MS: "10",
      GATEWAY_CIRCUIT_COOLDOWN_MS: "600000"
    })
    openai = new OpenAI({ apiKey: gw.apiKey!, baseURL: `${gw.baseUrl}/v1`, maxRetries: 0 })
  })
  afterAll(async () => {
    await gw?.close()
    await proxy?.close()
    await Effect.runPromise(dropPrefix(redisUrl!, prefix))
  })

  it("one placement: metering in one script, the slot in one script", async () => {
    await admissionOf("svc-lyra-3") // warm: scripts loaded, key cached
    expect(await admissionOf("svc-lyra-3")).toEqual({ gateAndReserve: 1, cqEnqueue: 1 })
  })

  it.each([false, true])("one round trip: the slot's enqueue goes out before the metering script is answered (stream: %s)", async (stream) => {
    await admissionOf("svc-lyra-3")
    // Redis's answers are held until the enqueue arrives: were it sent only after the metering's
    // answer, nothing would come for the whole hold (and the hold would end by its timeout).
    const watched = proxy.holdReplies("cqEnqueue", 600)
    const messages = [{ role: "user" as const, content: "say exactly: ok" }]
    if (stream) {
      let text = ""
      for await (const chunk of await openai.chat.completions.create({ model: "svc-lyra-3", messages, stream: true })) text += chunk.choices[0]?.delta.content ?? ""
      expect(text).toBe("ok")
    } else {
      const answer = await openai.chat.completions.create({ model: "svc-lyra-3", messages })
      expect(answer.choices[0]!.message.content).toBe("ok")
    }
    const { sent, released } = await watched
    expect(released).toBe("seen")
    // One EVALSHA of the bundle, the metering script first: no other command between the two.
    const admission = sent.indexOf("gwGateAndReserve")
    expect(admission).toBeGreaterThanOrEqual(0)
    const enqueue = sent.indexOf("cqEnqueue")
    expect(enqueue).toBeGreaterThan(admission)
    expect(sent.slice(admission, enqueue).toLowerCase()).not.toContain("evalsha")
    expect(await queueOf(gw, "lyra-only")).toMatchObject({ inUse: 0, waiting: 0 })
  })

  it("a refused call takes no slot: its enqueue finds no admission ticket", async () => {
    // Another key on a plan of 1 request a minute: the second call is refused by the rate gate.
    const created = await gw.admin("POST", "/admin/v1/keys", { name: "one-a-minute", plan: "tiny" })
    expect(created.status).toBe(201)
    const limited = new OpenAI({ apiKey: ((await created.json()) as { key: string }).key, baseURL: `${gw.baseUrl}/v1`, maxRetries: 0 })
    await limited.chat.completions.create({ model: "svc-lyra-3", messages: [{ role: "user", content: "hi" }], max_tokens: 8 })
    const before = await roundTrips()
    for (const stream of [false, true]) {
      const refused = await limited.chat.completions.create({ model: "svc-lyra-3", messages: [{ role: "user", content: "hi" }], max_tokens: 8, stream })
        .then(() => undefined, (error: unknown) => error)
      expect(refused).toBeInstanceOf(OpenAI.RateLimitError)
    }
    const after = await roundTrips()
    // Each enqueue went out behind its refused admission and came back empty-handed: no slot
    // held, nobody waiting, no ticket left behind.
    expect((after.get("cqEnqueue") ?? 0) - (before.get("cqEnqueue") ?? 0)).toBe(2)
    expect(await queueOf(gw, "lyra-only")).toMatchObject({ inUse: 0, waiting: 0 })
    const redis = new Redis(redisUrl!)
    try {
      expect(await redis.keys(`${prefix}adm:*`)).toEqual([])
    } finally {
      redis.disconnect()
    }
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
