/**
 * The Redis store (ioredis): every operation is one Lua script (EVALSHA through `defineCommand`),
 * so check-and-take is atomic across instances.
 *
 * Outages: the offline queue is off and commands time out after `commandTimeoutMs`, so a Redis
 * that is down makes operations fail fast with `CoordinationError` instead of piling up; the
 * callers then fail open (rate limits) or closed (budgets). Every key carries a TTL, so state of
 * a dead instance (leases, holds, windows) lapses on its own.
 */
import { Effect, Scope } from "effect"
import { Redis } from "ioredis"
import type { CoordinationShape } from "./coordination.ts"
import * as Lua from "./lua.ts"
import { type BudgetAnswer, type BudgetReserveRequest, type BudgetState, CoordinationError, type Epoch, type GateRequest, type GateResult, KEY_PREFIX, SETTLED_MEMORY_MS } from "./types.ts"

export interface RedisOptions {
  /** Prefix of every key (default `gw:`); tests use a unique one. */
  readonly prefix?: string
  readonly commandTimeoutMs?: number
  readonly connectTimeoutMs?: number
}

type Reply = ReadonlyArray<number>
interface Scripts {
  gwGate(numKeys: number, ...args: Array<string | number>): Promise<Reply>
  gwRenewLease(numKeys: number, ...args: Array<string | number>): Promise<number>
  gwReserve(numKeys: number, ...args: Array<string | number>): Promise<Reply>
  gwFinish(numKeys: number, ...args: Array<string | number>): Promise<Reply>
  gwRenewHold(numKeys: number, ...args: Array<string | number>): Promise<number>
  gwCharge(numKeys: number, ...args: Array<string | number>): Promise<number>
  gwSeed(numKeys: number, ...args: Array<string | number>): Promise<number>
  gwEpochInit(numKeys: number, ...args: Array<string | number>): Promise<Array<string | null>>
  gwGrant(numKeys: number, ...args: Array<string | number>): Promise<number>
  gwState(numKeys: number, ...args: Array<string | number>): Promise<Reply>
}

const scriptSources: Record<keyof Scripts, string> = {
  gwGate: Lua.GATE,
  gwRenewLease: Lua.RENEW_LEASE,
  gwReserve: Lua.RESERVE,
  gwFinish: Lua.FINISH,
  gwRenewHold: Lua.RENEW_HOLD,
  gwCharge: Lua.CHARGE,
  gwSeed: Lua.SEED,
  gwEpochInit: Lua.EPOCH_INIT,
  gwGrant: Lua.GRANT,
  gwState: Lua.STATE
}

const toState = (reply: Reply): BudgetState => ({ spent: reply[1], reserved: reply[2], granted: reply[3] })

/**
 * Waits for a connection's first "ready", at most `timeoutMs`; then goes on with a warning: a Redis
 * down at start is an outage like any later one, not a crash.
 */
export const awaitReady = (client: Redis, timeoutMs: number, warning: string) =>
  Effect.callback<void>((resume) => {
    if (client.status === "ready") return resume(Effect.void)
    const ready = () => resume(Effect.void)
    client.once("ready", ready)
    return Effect.sync(() => client.off("ready", ready))
  }).pipe(
    Effect.timeoutOption(timeoutMs),
    Effect.tap((connected) => (connected._tag === "None" ? Effect.logWarning(warning) : Effect.void)),
    Effect.asVoid
  )

export const makeRedis = (url: string, options: RedisOptions = {}): Effect.Effect<CoordinationShape, never, Scope.Scope> =>
  Effect.gen(function*() {
    const prefix = options.prefix ?? KEY_PREFIX
    let lastErrorLog = 0
    const client = yield* Effect.acquireRelease(
      Effect.sync(() => {
        const redis = new Redis(url, {
          enableOfflineQueue: false,
          maxRetriesPerRequest: 1,
          commandTimeout: options.commandTimeoutMs ?? 1_000,
          connectTimeout: options.connectTimeoutMs ?? 5_000,
          retryStrategy: (attempt) => Math.min(attempt * 200, 2_000)
        })
        // Without a listener ioredis prints every reconnect failure; one line per 10 s is enough.
        redis.on("error", (error: Error) => {
          if (Date.now() - lastErrorLog < 10_000) return
          lastErrorLog = Date.now()
          console.warn(`coordination: redis error: ${error.message}`)
        })
        for (const [name, lua] of Object.entries(scriptSources)) redis.defineCommand(name, { lua })
        return redis
      }),
      (redis) => Effect.promise(() => redis.quit().catch(() => redis.disconnect())).pipe(Effect.ignore)
    )
    // Wait for the first connection so early requests do not fail for nothing; a Redis down at
    // start is an outage like any later one (callers fail open/closed), not a crash.
    yield* awaitReady(client, options.connectTimeoutMs ?? 5_000, `coordination: redis not ready at start (${url})`)
    const scripts = client as unknown as Scripts

    const call = <A>(name: string, run: () => Promise<A>) =>
      Effect.tryPromise({
        try: run,
        catch: (cause) => new CoordinationError({ message: `redis ${name}: ${cause instanceof Error ? cause.message : String(cause)}` })
      })
    const scopeKey = (scope: string, part: string) => `${prefix}rl:{${scope}}:${part}`
    const budgetKeys = (budget: string) =>
      [`${prefix}b:{${budget}}`, `${prefix}bh:{${budget}}`, `${prefix}be:{${budget}}`] as const
    const pendingKey = (budget: string) => `${prefix}bp:{${budget}}`
    /** B, H, E, P: what settles, renewals and pending charges touch. */
    const writeKeys = (budget: string) => [...budgetKeys(budget), pendingKey(budget)] as const
    const grantsKey = (budget: string) => `${prefix}bg:{${budget}}`
    const epochKey = `${prefix}epoch`
    const pipelined = (name: string, add: (pipeline: Scripts) => void) =>
      call(name, async () => {
        const pipeline = client.pipeline() as unknown as Scripts & { exec(): Promise<Array<[Error | null, unknown]> | null> }
        add(pipeline)
        // A pipeline resolves even when a command in it failed: surface the first failure.
        for (const [error] of (await pipeline.exec()) ?? []) if (error !== null) throw error
      })

    const gateCall = (request: GateRequest) => ({
      keys: [scopeKey(request.scope, "leases"), ...request.buckets.map((b) => scopeKey(request.scope, `bucket:${b.name}`))],
      args: [
        request.now,
        request.lease?.limit ?? -1,
        request.lease?.id ?? "",
        request.lease?.ttlMs ?? 0,
        request.buckets.length,
        ...request.buckets.flatMap((b) => [b.capacity, b.periodMs, b.cost])
      ] as Array<string | number>,
      parse: (reply: Reply): GateResult => ({
        admitted: reply[0] === 1,
        leaseRefused: reply[1] === 1,
        leasesInUse: reply[2],
        buckets: request.buckets.map((b, i) => ({
          name: b.name,
          capacity: b.capacity,
          remaining: reply[3 + 3 * i],
          resetMs: reply[4 + 3 * i],
          retryAfterMs: reply[5 + 3 * i]
        }))
      })
    })
    const reserveCall = (request: BudgetReserveRequest) => ({
      keys: [...budgetKeys(request.budget)],
      args: [request.cap ?? -1, request.amount, request.id, request.ttlMs, request.now, request.expireAt] as Array<string | number>,
      parse: (reply: Reply): BudgetAnswer =>
        reply[0] === 0 ? { _tag: "Unseeded" } : { _tag: reply[0] === 1 ? "Reserved" : "Refused", state: toState(reply) }
    })

    return {
      kind: "redis",
      scope: prefix,

      gate: (request) => {
        const { keys, args, parse } = gateCall(request)
        return call("gate", () => scripts.gwGate(keys.length, ...keys, ...args)).pipe(Effect.map(parse))
      },

      gateAndReserve: (gate, reserve) => {
        // One round trip for a call's admission: both scripts go in one pipeline. Each stays atomic
        // on its own; the caller undoes the one that succeeded when the other refuses.
        const g = gateCall(gate)
        const r = reserveCall(reserve)
        return call("gateAndReserve", async () => {
          const pipeline = client.pipeline() as unknown as Scripts & { exec(): Promise<Array<[Error | null, unknown]> | null> }
          pipeline.gwGate(g.keys.length, ...g.keys, ...g.args)
          pipeline.gwReserve(r.keys.length, ...r.keys, ...r.args)
          const replies = (await pipeline.exec()) ?? []
          for (const [error] of replies) if (error !== null) throw error
          return [g.parse(replies[0]![1] as Reply), r.parse(replies[1]![1] as Reply)] as const
        })
      },

      releaseLease: (lease) => call("releaseLease", () => client.zrem(scopeKey(lease.scope, "leases"), lease.id)).pipe(Effect.asVoid),

      renewLeases: (leases, ttlMs, now) =>
        leases.length === 0 ? Effect.void : call("renewLeases", () => {
          const pipeline = client.pipeline() as unknown as Scripts & { exec(): Promise<unknown> }
          for (const lease of leases) pipeline.gwRenewLease(1, scopeKey(lease.scope, "leases"), lease.id, now + ttlMs, ttlMs)
          return pipeline.exec()
        }).pipe(Effect.asVoid),

      budgetReserve: (request) => {
        const { keys, args, parse } = reserveCall(request)
        return call("budgetReserve", () => scripts.gwReserve(keys.length, ...keys, ...args)).pipe(Effect.map(parse))
      },

      budgetSettle: (request) =>
        call("budgetSettle", () =>
          scripts.gwFinish(4, ...writeKeys(request.budget), request.id, request.chargeId, request.amount, request.actual, request.now, SETTLED_MEMORY_MS, "settle")
        ).pipe(Effect.map((reply) => reply[0] === 0 ? undefined : toState(reply))),

      budgetRelease: (hold, now) =>
        call("budgetRelease", () =>
          scripts.gwFinish(4, ...writeKeys(hold.budget), hold.id, hold.id, 0, 0, now, SETTLED_MEMORY_MS, "release")
        ).pipe(Effect.map((reply) => reply[0] === 0 ? undefined : toState(reply))),

      budgetRenew: (holds, ttlMs, now) =>
        holds.length === 0 ? Effect.void : pipelined("budgetRenew", (pipeline) => {
          for (const hold of holds) pipeline.gwRenewHold(4, ...writeKeys(hold.budget), hold.id, hold.amount, now + ttlMs, SETTLED_MEMORY_MS)
        }),

      budgetCharge: (charges, now) =>
        charges.length === 0 ? Effect.void : pipelined("budgetCharge", (pipeline) => {
          for (const charge of charges) pipeline.gwCharge(4, ...writeKeys(charge.budget), charge.id, charge.amount, now, SETTLED_MEMORY_MS)
        }),

      budgetPendingCharges: (budget) => call("budgetPendingCharges", () => client.hkeys(pendingKey(budget))),

      budgetSeed: (seed) =>
        call("budgetSeed", () =>
          scripts.gwSeed(5, ...writeKeys(seed.budget), grantsKey(seed.budget), seed.now, seed.spent, seed.granted, seed.expireAt, seed.final ? 1 : 0,
            seed.counted.length, ...seed.counted, seed.uncounted.length, ...seed.uncounted, ...seed.grantIds)
        ).pipe(Effect.map((answer) => answer === 1 ? "Seeded" as const : answer === 0 ? "Exists" as const : "Stale" as const)),

      budgetGrant: (grant) =>
        call("budgetGrant", () => scripts.gwGrant(2, budgetKeys(grant.budget)[0], grantsKey(grant.budget), grant.grantId, grant.amount))
          .pipe(Effect.map((applied) => applied === 1)),

      budgetState: (budget, now) =>
        call("budgetState", () => scripts.gwState(3, ...budgetKeys(budget), now))
          .pipe(Effect.map((reply) => reply[0] === 0 ? undefined : toState(reply))),

      epochRead: () =>
        call("epochRead", () => client.hmget(epochKey, "id", "fence"))
          .pipe(Effect.map(([id, fence]): Epoch | undefined => id == null ? undefined : { id, fenceUntil: Number(fence ?? 0) })),

      epochInit: (epoch) =>
        call("epochInit", () => scripts.gwEpochInit(1, epochKey, epoch.id, epoch.fenceUntil))
          .pipe(Effect.map(([id, fence]): Epoch => ({ id: id ?? epoch.id, fenceUntil: Number(fence ?? 0) })))
    } satisfies CoordinationShape
  })
