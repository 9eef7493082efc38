/**
 * Redis's own time per request in Redis mode, without a gateway: one non-streamed request's two
 * bundles — its admission (the rate limits' gate and the allowance's reservation, then the capacity
 * queue's enqueue) and its end (the slot's release, the settle, the lease's release) — replayed
 * back to back against the real scripts (`coordination/lua.ts`, `runtime/queue-lua.ts`, sent as
 * the gateway sends them: `coordination/script-bundle.ts`), with fresh ids each time as requests
 * have. Redis's `EVALSHA` time is read from `INFO commandstats` before and after (the difference:
 * other clients of the same Redis are not reset), so the figure is the server's work alone, not
 * the round trips'.
 *
 *   node bench/redis-scripts.ts [--requests 3000] [--stub] [--url redis://127.0.0.1:6379]
 *
 * `--stub` replaces every script's body with a constant answer: what is left is the fixed part of
 * an `EVALSHA` of the bundle (its ~60 arguments, their tables, the dispatcher). Keys live under a
 * random prefix, deleted at the end. The arguments follow a `hot-path --redis` request's (captured
 * with `MONITOR`): two rate-limit buckets, a concurrency lease, a seeded allowance, one placement.
 */
import { Command, Redis } from "ioredis"
import { parseArgs } from "node:util"
import * as Allowance from "../src/coordination/lua.ts"
import { makeScriptBatcher } from "../src/coordination/script-bundle.ts"
import * as Queue from "../src/runtime/queue-lua.ts"

const { values } = parseArgs({
  options: {
    requests: { type: "string", default: "3000" },
    stub: { type: "boolean", default: false },
    url: { type: "string", default: "redis://127.0.0.1:6379" }
  }
})
const requests = Number(values.requests)
const redis = new Redis(values.url)
const prefix = `bench-scripts-${Math.random().toString(36).slice(2, 8)}:`

// The names the gateway defines them under (coordination/redis.ts, runtime/redis-capacity-queues.ts).
const scripts: Record<string, string> = {
  gwGateAndReserve: Allowance.GATE_AND_RESERVE,
  gwFinish: Allowance.FINISH,
  gwReleaseLease: Allowance.RELEASE_LEASE,
  cqEnqueue: Queue.ENQUEUE,
  cqRelease: Queue.RELEASE
}
// A constant of each script's reply shape, so the caller's side runs as it does for real.
const STUB = "return { 1, { 1, 0, 0 }, { 1, 0, 0, 0 } }"
const batcher = makeScriptBatcher(redis, Command)
batcher.define(values.stub ? Object.fromEntries(Object.keys(scripts).map((name) => [`${name}Stub`, STUB])) : scripts)
const named = (name: string) => (values.stub ? `${name}Stub` : name)

const keyId = "key_bench"
const budget = (kind: string) => `${prefix}${kind}:{allowance:${keyId}:2026-12}`
const [B, H, E, P] = ["b", "bh", "be", "bp"].map(budget) as [string, string, string, string]
const leases = `${prefix}rl:{${keyId}}:leases`
const buckets = [`${prefix}rl:{${keyId}}:bucket:rpm`, `${prefix}rl:{${keyId}}:bucket:tpm`]
const placement = ["meta", "holders", "ring", "waiters", "alive"].map((k) => `${prefix}cq:{bench}:${k}`)
const queueArgs = (now: number) => [`${prefix}cq:{bench}:lane:`, `${prefix}cq:grants:`, "bench", now, "20000", "100000"]

await redis.hset(B, "spent", "0", "reserved", "0", "granted", "1000000000000")

let n = 0
/** One request: its admission's bundle, then its end's, each awaited as the gateway awaits them. */
const oneRequest = async () => {
  n++
  const now = Date.now()
  const ticket = `${prefix}adm:${n}`
  const lease = `lease_${n}`, hold = `res_${n}`, charge = `call_${n}`, waiter = `bench/${n}`
  const admission = [
    batcher.queue(named("gwGateAndReserve"), 7, [
      leases, ...buckets, B, H, E, ticket,
      // GATE's key and argument counts, the ticket's TTL; GATE's arguments; RESERVE's.
      "3", "11", "10000",
      now, "100000", lease, "60000", "2", "10000000", "60000", "1", "10000000000", "60000", "58",
      "1000000000000", "16", hold, "60000", now, "1801440000000"
    ]),
    batcher.queue(named("cqEnqueue"), 6, [...placement, ticket, ...queueArgs(now), waiter, keyId, "15000", "0"])
  ]
  batcher.flush()
  await Promise.all(admission)
  const then = Date.now()
  const end = [
    batcher.queue(named("cqRelease"), 5, [...placement, ...queueArgs(then), waiter, "success", "3", "30000", "0"]),
    batcher.queue(named("gwFinish"), 4, [B, H, E, P, hold, charge, "16", "9", then, "600000", "settle"]),
    batcher.queue(named("gwReleaseLease"), 1, [leases, lease])
  ]
  batcher.flush()
  await Promise.all(end)
}

/** Redis's total `EVALSHA` calls and µs so far. */
const evalshaStats = async () => {
  const m = /cmdstat_evalsha:calls=(\d+),usec=(\d+)/.exec(await redis.info("commandstats"))
  return m === null ? { calls: 0, usec: 0 } : { calls: Number(m[1]), usec: Number(m[2]) }
}

try {
  for (let i = 0; i < 300; i++) await oneRequest()
  const before = await evalshaStats()
  const startedAt = performance.now()
  for (let i = 0; i < requests; i++) await oneRequest()
  const wallUs = ((performance.now() - startedAt) * 1000) / requests
  const after = await evalshaStats()
  const calls = after.calls - before.calls
  console.log(JSON.stringify({
    stub: values.stub,
    requests,
    evalshaPerRequest: Math.round((calls / requests) * 100) / 100,
    redisUsPerRequest: Math.round(((after.usec - before.usec) / requests) * 10) / 10,
    redisUsPerEvalsha: Math.round(((after.usec - before.usec) / calls) * 10) / 10,
    // Both round trips from this client, back to back: Redis's time plus the loopback's and the wake-ups'.
    clientUsPerRequest: Math.round(wallUs)
  }))
} finally {
  let cursor = "0"
  do {
    const [next, keys] = await redis.scan(cursor, "MATCH", `${prefix}*`, "COUNT", 1000)
    if (keys.length > 0) await redis.del(...keys)
    cursor = next
  } while (cursor !== "0")
  redis.disconnect()
}
