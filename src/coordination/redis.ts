/**
 * The Redis store (ioredis): every operation is one Lua script (an EVALSHA: script-bundle.ts),
 * so check-and-take is atomic across instances.
 *
 * Runs on the shared RedisClient (redis-client.ts), under its key prefix. Outages: commands fail
 * fast there, which this store reports as `CoordinationError`; the callers then fail open (rate
 * limits) or closed (budgets). Every key carries a TTL, so state of a dead instance (leases,
 * holds, windows) lapses on its own.
 */
import { Effect } from "effect"
import type { CoordinationShape } from "./coordination.ts"
import * as Lua from "./lua.ts"
import { ADMISSION_TICKET_TTL_MS, admissionTicketKey, RedisClient, type RedisError } from "./redis-client.ts"
import { type BudgetAnswer, type BudgetReserveRequest, type BudgetState, CoordinationError, type Epoch, type GateRequest, type GateResult, SETTLED_MEMORY_MS, type SettleAnswer } from "./types.ts"

type Reply = ReadonlyArray<number>
interface Scripts {
  gwGate(numKeys: number, ...args: Array<string | number>): Promise<Reply>
  gwRenewLease(numKeys: number, ...args: Array<string | number>): Promise<number>
  gwReleaseLease(numKeys: number, ...args: Array<string | number>): Promise<number>
  gwReserve(numKeys: number, ...args: Array<string | number>): Promise<Reply>
  gwGateAndReserve(numKeys: number, ...args: Array<string | number>): Promise<readonly [Reply, Reply]>
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
  gwReleaseLease: Lua.RELEASE_LEASE,
  gwReserve: Lua.RESERVE,
  gwGateAndReserve: Lua.GATE_AND_RESERVE,
  gwFinish: Lua.FINISH,
  gwRenewHold: Lua.RENEW_HOLD,
  gwCharge: Lua.CHARGE,
  gwSeed: Lua.SEED,
  gwEpochInit: Lua.EPOCH_INIT,
  gwGrant: Lua.GRANT,
  gwState: Lua.STATE
}

const toState = (reply: Reply): BudgetState => ({ spent: reply[1], reserved: reply[2], granted: reply[3] })

/** The store on the RedisClient of the context. */
export const makeRedis: Effect.Effect<CoordinationShape, never, RedisClient> = Effect.gen(function*() {
  const redis = yield* RedisClient
  const prefix = redis.prefix
  redis.defineScripts(scriptSources)
  const client = redis.client
  const scripts = client as unknown as Scripts

  const toCoordinationError = (error: RedisError) => new CoordinationError({ message: `redis ${error.operation}: ${error.message}` })
  const call = <A>(name: string, run: () => Promise<A>) => redis.use(name, run).pipe(Effect.mapError(toCoordinationError))
  /** One script, batched with the turn's other scripts into one command (script-bundle.ts). */
  const script = <A>(operation: string, name: keyof Scripts, numKeys: number, keysAndArgs: ReadonlyArray<string | number>) =>
    redis.useScript(operation, name, numKeys, keysAndArgs).pipe(Effect.map((reply) => reply as A), Effect.mapError(toCoordinationError))
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
      return script<Reply>("gate", "gwGate", keys.length, [...keys, ...args]).pipe(Effect.map(parse))
    },

    gateAndReserve: (gate, reserve, ticket) => {
      // One round trip and one script for a call's admission (Lua.GATE_AND_RESERVE): each part
      // decides as it would alone; the caller undoes the one that succeeded when the other refuses.
      const g = gateCall(gate)
      const r = reserveCall(reserve)
      const ticketKeys = ticket === undefined ? [] : [admissionTicketKey(prefix, ticket)]
      return script<readonly [Reply, Reply]>("gateAndReserve", "gwGateAndReserve", g.keys.length + r.keys.length + ticketKeys.length, [
        ...g.keys,
        ...r.keys,
        ...ticketKeys,
        g.keys.length,
        g.args.length,
        ticket === undefined ? 0 : ADMISSION_TICKET_TTL_MS,
        ...g.args,
        ...r.args
      ]).pipe(Effect.map(([gated, reserved]) => [g.parse(gated), r.parse(reserved)] as const))
    },

    // Sent, not awaited (as the queue's slot release, in the same command as it and the settle):
    // the connection runs commands in order, so the next command's answer finds it done; a lost
    // one lapses with the lease's TTL.
    releaseLease: (lease) =>
      Effect.sync(() =>
        redis.sendScript(
          "releaseLease",
          "gwReleaseLease",
          1,
          [scopeKey(lease.scope, "leases"), lease.id],
          (message) => `rate limits: lease release (it lapses after its TTL): ${message}`
        )
      ),

    renewLeases: (leases, ttlMs, now) =>
      leases.length === 0 ? Effect.void : call("renewLeases", () => {
        const pipeline = client.pipeline() as unknown as Scripts & { exec(): Promise<unknown> }
        for (const lease of leases) pipeline.gwRenewLease(1, scopeKey(lease.scope, "leases"), lease.id, now + ttlMs, ttlMs)
        return pipeline.exec()
      }).pipe(Effect.asVoid),

    budgetReserve: (request) => {
      const { keys, args, parse } = reserveCall(request)
      return script<Reply>("budgetReserve", "gwReserve", keys.length, [...keys, ...args]).pipe(Effect.map(parse))
    },

    budgetSettle: (request) =>
      script<Reply>("budgetSettle", "gwFinish", 4, [
        ...writeKeys(request.budget), request.id, request.chargeId, request.amount, request.actual, request.now, SETTLED_MEMORY_MS, "settle"
      ]).pipe(Effect.map((reply): SettleAnswer => {
        const [applied, charge] = reply[0] === 0 ? [reply[1], reply[2]] : [reply[4], reply[5]]
        return { state: reply[0] === 0 ? undefined : toState(reply), charged: applied === 1, chargedMicros: typeof charge === "number" && charge >= 0 ? charge : undefined }
      })),

    budgetRelease: (hold, now) =>
      script<Reply>("budgetRelease", "gwFinish", 4, [...writeKeys(hold.budget), hold.id, hold.id, 0, 0, now, SETTLED_MEMORY_MS, "release"]).pipe(Effect.map((reply) => reply[0] === 0 ? undefined : toState(reply))),

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
