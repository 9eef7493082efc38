/**
 * Item 2: queueing under overload. One model, one simulator placement with capacity C and a fixed
 * latency (ttftMs = service time, tokensPerSecond 0). Four keys offer twice its capacity, open
 * loop, one key sending 70% of the requests and three 10% each. Measured per run:
 * - statuses (429 must never appear: the gateway waits instead);
 * - per-key throughput while the offer lasts (answers finished inside the window, after its first
 *   second) against the key's max-min fair share, and Jain's index over throughput ÷ fair share;
 * - per-key wait = latency − service time (the service time measured unloaded before the runs);
 * - queue depth from GET /admin/v1/queues and the gateway's RSS (/proc/<pid>/status), every pollMs.
 * Then the same with two gateway instances sharing PostgreSQL and Redis, each key's requests
 * alternating between them.
 */
import { makePool, openLoop, type RequestSpec, type Sample, sampleSpan, sequential } from "../lib/load.ts"
import { clearRedisPrefix, freshDatabase, type Gateway, randomToken, rssBytes, startGateway } from "../lib/procs.ts"
import type { Profile } from "../lib/profile.ts"
import { distribution, type Distribution, jain, maxMinFair, median } from "../lib/stats.ts"
import { sleep, stamp } from "./overhead.ts"
import { benchChatModel } from "../lib/catalog.ts"

const KEYS = ["key-a", "key-b", "key-c", "key-d"] as const
const SHARES = [0.7, 0.1, 0.1, 0.1]
/** Key order of each 10-request cycle: 7 × A, 1 each of B, C, D, spread out. */
const CYCLE = [0, 1, 0, 0, 2, 0, 0, 3, 0, 0]
const PLACEMENT = "queue-a"

const log = (line: string) => console.log(`${stamp()} [queueing] ${line}`)

export interface KeyFigures {
  readonly key: string
  readonly offeredShare: number
  readonly fairShare: number
  readonly throughputShare: number
  readonly throughputRps: number
  readonly requests: number
  readonly statuses: Record<string, number>
  readonly waitMs: Distribution
  readonly maxWaiting: number
}

export interface QueueRun {
  readonly offeredRps: number
  readonly capacityRps: number
  readonly total429: number
  readonly totalNon200: number
  readonly jain: number
  /** Jain's index over raw throughputs (1 only if every key got the same, whatever it asked). */
  readonly jainRaw: number
  readonly keys: KeyFigures[]
  readonly maxQueueDepth: number
  readonly maxInUse: number
  readonly rssIdleBytes: number[]
  readonly rssMaxQueuedBytes: number[]
  readonly durationMs: number
  readonly series: Array<{ t: number; waiting: number; inUse: number; rss: number[] }>
}

export interface QueueSetupResult {
  readonly setup: string
  readonly instances: number
  readonly capacity: number
  readonly serviceMs: number
  readonly measuredServiceMs: number
  readonly runs: QueueRun[]
  readonly median: {
    readonly total429: number
    readonly totalNon200: number
    readonly jain: number
    readonly jainRaw: number
    readonly maxQueueDepth: number
    readonly rssIdleMiB: number
    readonly rssMaxQueuedMiB: number
    readonly keys: Array<{ key: string; offeredShare: number; fairShare: number; throughputShare: number; waitP50Ms: number; waitP99Ms: number; maxWaiting: number; count429: number }>
  }
}

export interface QueueingResult {
  readonly setups: QueueSetupResult[]
  readonly notes: string[]
}

const queueConfig = (capacity: number, serviceMs: number) => ({
  models: [
    benchChatModel("svc-queue", "Queue benchmark (simulated)", [{ id: PLACEMENT, backend: "simulator", capacity, simulator: { ttftMs: serviceMs, tokensPerSecond: 0 } }])
  ],
  plans: { bench: { allowanceUsd: 1_000_000_000, rpm: 1_000_000_000, tpm: 1_000_000_000, concurrency: 100_000 } },
  defaultPlan: "bench"
})

const BODY = JSON.stringify({ model: "svc-queue", max_tokens: 16, messages: [{ role: "user", content: "Queue benchmark: one short sentence." }] })

const runSetup = async (setup: string, instances: Gateway[], profile: Profile): Promise<QueueSetupResult> => {
  const q = profile.queueing
  const created: Array<{ id: string; key: string }> = await Promise.all(
    KEYS.map((k) => instances[0]!.admin("POST", "/admin/v1/keys", { name: `${setup.replace(/[^a-z0-9]+/gi, "-")}-${k}`, plan: "bench" }))
  )
  const keys = created.map((c) => c.key)
  const labelOf = new Map(created.map((c, i) => [c.id, KEYS[i]!]))
  const pools = instances.map((g) => makePool(g.url, 4096))
  const specFor = (key: number, instance: number): RequestSpec => ({
    pool: pools[instance]!,
    path: "/v1/chat/completions",
    headers: { "content-type": "application/json", authorization: `Bearer ${keys[key]}` },
    body: BODY,
    label: KEYS[key]!
  })
  // Warm-up on every instance, then the unloaded service time (sequential, so nothing waits).
  for (let i = 0; i < instances.length; i++) await sequential(10, (n) => specFor(n % 4, i))
  const calibration = await sequential(20, (n) => specFor(n % 4, n % instances.length))
  const serviceMs = median(calibration.map((s) => s.end - s.scheduled))
  const capacityRps = (q.capacity * 1000) / serviceMs
  const offeredRps = 2 * capacityRps
  log(`${setup}: service time ${serviceMs.toFixed(1)} ms → capacity ${capacityRps.toFixed(1)} req/s, offering ${offeredRps.toFixed(1)} req/s`)

  const runs: QueueRun[] = []
  for (let run = 0; run < profile.runs; run++) {
    await sleep(500)
    const rssIdle = instances.map((g) => rssBytes(g.pid))
    const counters = [0, 0, 0, 0]
    const series: QueueRun["series"] = []
    const maxWaitingByKey: Record<string, number> = {}
    let maxDepth = 0
    let maxInUse = 0
    const rssMax = [...rssIdle]
    let polling = true
    const start = performance.now()
    const poller = (async () => {
      while (polling) {
        const views = await Promise.all(instances.map((g) => g.admin("GET", "/admin/v1/queues").catch(() => null)))
        const rss = instances.map((g) => rssBytes(g.pid))
        rss.forEach((r, i) => (rssMax[i] = Math.max(rssMax[i]!, r)))
        let waiting = 0
        let inUse = 0
        for (const view of views) {
          const row = view?.data?.find((d: { placementId: string }) => d.placementId === PLACEMENT)
          if (row === undefined) continue
          // With Redis every instance reports the one shared queue; without, there is one instance.
          waiting = Math.max(waiting, row.waiting)
          inUse = Math.max(inUse, row.inUse)
          for (const [id, n] of Object.entries(row.waitingByKey as Record<string, number>)) {
            const k = labelOf.get(id) ?? id
            maxWaitingByKey[k] = Math.max(maxWaitingByKey[k] ?? 0, n)
          }
        }
        maxDepth = Math.max(maxDepth, waiting)
        maxInUse = Math.max(maxInUse, inUse)
        series.push({ t: Math.round(performance.now() - start), waiting, inUse, rss })
        await sleep(q.pollMs)
      }
    })()
    const result = await openLoop({
      rate: offeredRps,
      durationMs: q.offerMs,
      pick: (i) => {
        const key = CYCLE[i % CYCLE.length]!
        const n = counters[key]!++
        return specFor(key, n % instances.length)
      }
    })
    polling = false
    await poller
    runs.push(figures(result.samples, result.t0, q.offerMs, offeredRps, capacityRps, serviceMs, maxDepth, maxInUse, rssIdle, rssMax, series, maxWaitingByKey))
    const last = runs[runs.length - 1]!
    log(`${setup} run ${run + 1}/${profile.runs}: 429s ${last.total429}, non-200 ${last.totalNon200}, Jain ${last.jain.toFixed(3)}, max depth ${last.maxQueueDepth}, ` +
      last.keys.map((k) => `${k.key} ${(k.throughputShare * 100).toFixed(1)}% (fair ${(k.fairShare * 100).toFixed(1)}%) wait p99 ${k.waitMs.p99.toFixed(0)} ms`).join("; "))
  }
  await Promise.all(pools.map((p) => p.close()))
  const mib = (b: number) => b / 1024 / 1024
  return {
    setup,
    instances: instances.length,
    capacity: q.capacity,
    serviceMs: q.serviceMs,
    measuredServiceMs: serviceMs,
    runs,
    median: {
      total429: median(runs.map((r) => r.total429)),
      totalNon200: median(runs.map((r) => r.totalNon200)),
      jain: median(runs.map((r) => r.jain)),
      jainRaw: median(runs.map((r) => r.jainRaw)),
      maxQueueDepth: median(runs.map((r) => r.maxQueueDepth)),
      rssIdleMiB: median(runs.map((r) => mib(r.rssIdleBytes.reduce((a, b) => a + b, 0)))),
      rssMaxQueuedMiB: median(runs.map((r) => mib(r.rssMaxQueuedBytes.reduce((a, b) => a + b, 0)))),
      keys: KEYS.map((key, i) => ({
        key,
        offeredShare: SHARES[i]!,
        fairShare: median(runs.map((r) => r.keys[i]!.fairShare)),
        throughputShare: median(runs.map((r) => r.keys[i]!.throughputShare)),
        waitP50Ms: median(runs.map((r) => r.keys[i]!.waitMs.p50)),
        waitP99Ms: median(runs.map((r) => r.keys[i]!.waitMs.p99)),
        maxWaiting: median(runs.map((r) => r.keys[i]!.maxWaiting)),
        count429: median(runs.map((r) => r.keys[i]!.statuses["429"] ?? 0))
      }))
    }
  }
}

const figures = (
  samples: ReadonlyArray<Sample>, t0: number, offerMs: number, offeredRps: number, capacityRps: number, serviceMs: number,
  maxDepth: number, maxInUse: number, rssIdle: number[], rssMax: number[], series: QueueRun["series"], maxWaitingByKey: Record<string, number>
): QueueRun => {
  // Throughput is counted while every key is still sending: from 1 s in to the end of the offer.
  const from = t0 + Math.min(1000, offerMs / 4)
  const to = t0 + offerMs
  const windowS = (to - from) / 1000
  const byKey = KEYS.map((key) => samples.filter((s) => s.label === key))
  const served = byKey.map((ss) => ss.filter((s) => s.status === 200 && s.end >= from && s.end < to).length / windowS)
  const totalServed = served.reduce((a, b) => a + b, 0)
  const fair = maxMinFair(SHARES.map((sh) => sh * offeredRps), capacityRps)
  const fairTotal = fair.reduce((a, b) => a + b, 0)
  const keys: KeyFigures[] = KEYS.map((key, i) => {
    const ss = byKey[i]!
    const statusCounts: Record<string, number> = {}
    for (const s of ss) statusCounts[s.status === 0 ? "error" : String(s.status)] = (statusCounts[s.status === 0 ? "error" : String(s.status)] ?? 0) + 1
    return {
      key,
      offeredShare: SHARES[i]!,
      fairShare: fair[i]! / fairTotal,
      throughputShare: served[i]! / totalServed,
      throughputRps: served[i]!,
      requests: ss.length,
      statuses: statusCounts,
      waitMs: distribution(ss.filter((s) => s.status === 200).map((s) => Math.max(0, s.end - s.scheduled - serviceMs))),
      maxWaiting: maxWaitingByKey[key] ?? 0
    }
  })
  const end = sampleSpan(samples).lastEnd
  return {
    offeredRps,
    capacityRps,
    total429: samples.filter((s) => s.status === 429).length,
    totalNon200: samples.filter((s) => s.status !== 200).length,
    jain: jain(keys.map((k, i) => k.throughputRps / fair[i]!)),
    jainRaw: jain(keys.map((k) => k.throughputRps)),
    keys,
    maxQueueDepth: maxDepth,
    maxInUse,
    rssIdleBytes: rssIdle,
    rssMaxQueuedBytes: rssMax,
    durationMs: end - t0,
    series: series.filter((_, i) => i % Math.max(1, Math.ceil(series.length / 400)) === 0)
  }
}

export const runQueueing = async (profile: Profile, logDir: string): Promise<QueueingResult> => {
  const q = profile.queueing
  const notes: string[] = []
  const setups: QueueSetupResult[] = []
  const config = queueConfig(q.capacity, q.serviceMs)
  const adminToken = randomToken()
  const env = { GATEWAY_QUEUE_MAX_WAIT_MS: String(3_600_000), GATEWAY_KEEPALIVE_MS: "10000" }

  log(`one instance, embedded database: capacity ${q.capacity}, service ${q.serviceMs} ms`)
  const single = await startGateway({ name: "queue-single", config, adminToken, logDir, cpu: 0, env })
  try {
    setups.push(await runSetup("one instance (embedded)", [single], profile))
  } finally {
    await single.stop()
  }

  const postgresUrl = process.env.BENCH_POSTGRES_URL ?? "postgres://root@127.0.0.1:5432/postgres"
  const redisUrl = process.env.BENCH_REDIS_URL ?? "redis://127.0.0.1:6379"
  let db: ReturnType<typeof freshDatabase> | undefined
  const prefix = `bench-q-${randomToken(4)}:`
  try {
    db = freshDatabase(postgresUrl)
    log(`two instances on PostgreSQL + Redis (prefix ${prefix})`)
    const shared = { ...env, DATABASE_URL: db.url, REDIS_URL: redisUrl, GATEWAY_REDIS_PREFIX: prefix }
    const first = await startGateway({ name: "queue-pg-1", config, adminToken, logDir, cpu: 0, env: shared })
    let second: Gateway | undefined
    try {
      second = await startGateway({ name: "queue-pg-2", config, adminToken, logDir, cpu: 0, env: shared })
      setups.push(await runSetup("two instances (PostgreSQL + Redis)", [first, second], profile))
    } finally {
      await Promise.all([first.stop(), second?.stop()])
    }
  } catch (error) {
    notes.push(`two-instance setup failed or skipped: ${String(error).split("\n")[0]}`)
    log(notes[notes.length - 1]!)
  } finally {
    db?.drop()
    clearRedisPrefix(redisUrl, prefix)
  }
  return { setups, notes }
}
