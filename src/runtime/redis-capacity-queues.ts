/**
 * The capacity queues on Redis, for several gateway instances: the same `CapacityQueuesShape` as
 * the in-process host (capacity-queues.ts), but a placement's slots, waiters and circuit live in
 * Redis and are changed only by the Lua scripts of queue-lua.ts, so capacity is global (never more
 * holders than capacity across instances) and waiters of every instance are served fairly.
 *
 * - Slots are leases with an expiry (`leaseTtlMs`) that the holding instance renews while the call
 *   runs; a crashed instance's slots come back when they lapse. Waiters carry a liveness expiry
 *   (`waiterTtlMs`) renewed the same way, so a dead instance's waiters are skipped.
 * - Grants reach instances over pub/sub, one channel per instance, on a subscriber connection of
 *   its own. Every `pollIntervalMs` the instance also runs SYNC for the placements it waits on or
 *   holds: it renews, sweeps, turns a cooled-down circuit half-open, grants, and reports which of
 *   its waiters hold a slot, so a lost message costs at most one interval. A waiter Redis forgot
 *   (a stall longer than its TTL, a Redis restart) is enqueued again.
 * - A grant for a waiter that was served elsewhere or is gone is cancelled at once, and a grant
 *   that is announced twice (message + SYNC + the enqueue's own answer) is handled once.
 * - The circuit lives in Redis (failures, state, openedUntil, probe), so every instance agrees on
 *   it and exactly one probe runs per placement, whichever instance sends it.
 * - Times are epoch ms from the Effect Clock of the caller (as in coordination/types.ts); a few ms
 *   of skew between instances only moves expiries that are seconds long.
 * - A Redis outage: waits go on (their deadline still ends them), releases and cancels are
 *   logged and lapse by TTL, `isOpen` answers false, `view` and `setCapacity` die.
 * - Capacity comes from the config, written at start by every instance (the config is the same
 *   everywhere); a `setCapacity` lasts until the next instance starts.
 */
import { Clock, Deferred, Effect, Exit, Queue, Schedule } from "effect"
import { randomBytes } from "node:crypto"
import { type CircuitState, DEFAULT_FAILURE_THRESHOLD } from "../../machines/queue.ts"
import { admissionTicketKey, RedisClient, type RedisClientOptions, type RedisClientShape, type RedisError } from "../coordination/redis-client.ts"
import {
  type AcquireOptions,
  type CapacityQueuesOptions,
  type CapacityQueuesShape,
  DEFAULT_DEADLINE_MS,
  DEFAULT_PROBE_COOLDOWN_MS,
  type Lease,
  type LeaseOutcome,
  type PendingAdmission,
  type PlacementQueueView,
  QueueTimeout
} from "./capacity-queue-types.ts"
import * as Lua from "./queue-lua.ts"

/** Keys and channels live under the client's prefix (`GATEWAY_REDIS_PREFIX`). */
export interface RedisCapacityQueuesOptions extends CapacityQueuesOptions {
  /** A slot not renewed for this long is given back (default 20 s). */
  readonly leaseTtlMs?: number | undefined
  /** How often held slots are renewed (default 5 s); keep it well under `leaseTtlMs`. */
  readonly leaseRenewMs?: number | undefined
  /** A waiter not renewed for this long is dropped (default 15 s). */
  readonly waiterTtlMs?: number | undefined
  /** Heartbeat of waiters and the fallback poll for lost grants (default 1 s). */
  readonly pollIntervalMs?: number | undefined
}

/** The queues' options plus those of a Redis client of their own (without its url). */
export type OwnClientQueuesOptions = RedisCapacityQueuesOptions & Omit<RedisClientOptions, "url">

/** A placement's keys, in the order queue-lua.ts names them (M, H, R, W, A). */
const PLACEMENT_KEYS = ["meta", "holders", "ring", "waiters", "alive"] as const

const DEFAULT_LEASE_TTL_MS = 20_000
const DEFAULT_LEASE_RENEW_MS = 5_000
const DEFAULT_WAITER_TTL_MS = 15_000
const DEFAULT_POLL_INTERVAL_MS = 1_000

const scriptSources = {
  cqSetCapacity: Lua.SET_CAPACITY,
  cqEnqueue: Lua.ENQUEUE,
  cqCancel: Lua.CANCEL,
  cqRelease: Lua.RELEASE,
  cqSync: Lua.SYNC,
  cqView: Lua.VIEW,
  cqPosition: Lua.POSITION
}
type ScriptName = keyof typeof scriptSources

interface Waiter {
  readonly keyId: string
  readonly deferred: Deferred.Deferred<Lease>
  /** Placements where it was (or is being) enqueued. */
  readonly enqueued: Set<string>
  lease: Lease | undefined
  /**
   * An enqueue behind its admission is on its way: the heartbeat leaves the waiter alone (were it
   * answered "not admitted", a heartbeat behind it would find it missing and enqueue it without
   * the ticket).
   */
  admitting: boolean
}

/** The queues on a Redis client of their own, which closes with the scope (tests, several instances in one process). */
export const makeRedisCapacityQueues = (url: string, options: OwnClientQueuesOptions) =>
  Effect.flatMap(
    RedisClient.make({ url, prefix: options.prefix, commandTimeoutMs: options.commandTimeoutMs, connectTimeoutMs: options.connectTimeoutMs }),
    (redis) => makeRedisCapacityQueuesOn(redis, options)
  )

/** The queues on the given RedisClient, under its key prefix; they stop when the enclosing scope closes. */
export const makeRedisCapacityQueuesOn = Effect.fnUntraced(function*(redis: RedisClientShape, options: RedisCapacityQueuesOptions) {
  const scope = yield* Effect.scope
  const clock = yield* Clock.Clock
  const prefix = redis.prefix
  const failureThreshold = options.failureThreshold ?? DEFAULT_FAILURE_THRESHOLD
  const cooldownMs = options.probeCooldownMs ?? DEFAULT_PROBE_COOLDOWN_MS
  const defaultDeadlineMs = options.defaultDeadlineMs ?? DEFAULT_DEADLINE_MS
  const leaseTtlMs = options.leaseTtlMs ?? DEFAULT_LEASE_TTL_MS
  const leaseRenewMs = options.leaseRenewMs ?? DEFAULT_LEASE_RENEW_MS
  const waiterTtlMs = options.waiterTtlMs ?? DEFAULT_WAITER_TTL_MS
  const pollIntervalMs = options.pollIntervalMs ?? DEFAULT_POLL_INTERVAL_MS
  // Renewals happen on the heartbeat's ticks; leave room for one late tick before anything lapses.
  if (Math.max(leaseRenewMs, pollIntervalMs) * 2 > leaseTtlMs || pollIntervalMs * 2 > waiterTtlMs) {
    return yield* Effect.die(new Error("capacity queues: leaseTtlMs must be ≥ 2 × the renewal interval, waiterTtlMs ≥ 2 × pollIntervalMs"))
  }
  const instanceId = randomBytes(6).toString("hex")
  const channelPrefix = `${prefix}cq:grants:`

  const capacities = new Map(options.placements.map(({ placementId, capacity }) => [placementId, capacity]))
  const keysOf = new Map([...capacities.keys()].map((placementId) => {
    const base = `${prefix}cq:{${placementId}}:`
    return [placementId, { keys: PLACEMENT_KEYS.map((k) => base + k), lanePrefix: `${base}lane:` }]
  }))

  redis.defineScripts(scriptSources)
  const client = redis.client

  const call = <A>(name: string, run: () => Promise<A>) => redis.use(name, run)
  /**
   * A queue script's keys and arguments on one placement: the placement's keys, `extraKeys`, the
   * common arguments, then `args` (see queue-lua.ts); `numKeys` says where the keys end.
   */
  const placementCall = (placementId: string, now: number, args: ReadonlyArray<string | number>, extraKeys: ReadonlyArray<string> = []) => {
    const { keys, lanePrefix } = keysOf.get(placementId)!
    return {
      numKeys: keys.length + extraKeys.length,
      keysAndArgs: [...keys, ...extraKeys, lanePrefix, channelPrefix, placementId, now, leaseTtlMs, capacities.get(placementId)!, ...args]
    }
  }
  /** Runs a queue script on one placement, one round trip (with the turn's other scripts: script-bundle.ts). */
  const run = (name: ScriptName, placementId: string, ...args: Array<string | number>) => runKeyed(name, placementId, [], args)
  /** The same with keys of its own after the placement's (the admission ticket). */
  const runKeyed = (name: ScriptName, placementId: string, extraKeys: ReadonlyArray<string>, args: ReadonlyArray<string | number>) =>
    Effect.flatMap(Clock.currentTimeMillis, (now) => {
      const { numKeys, keysAndArgs } = placementCall(placementId, now, args, extraKeys)
      return redis.useScript(name, name, numKeys, keysAndArgs)
    })
  const warnOnError = (what: string) => Effect.catch((error: RedisError) => Effect.logWarning(`capacity queues: ${what}: ${error.message}`))

  // waiterId → a request of this instance that is still waiting (or was just granted)
  const waiters = new Map<string, Waiter>()
  // waiterId → placement, for the leases this instance holds and renews
  const held = new Map<string, string>()
  let nextWaiter = 0

  const cancelOn = (placementId: string, waiterId: string) =>
    run("cqCancel", placementId, waiterId).pipe(Effect.asVoid, warnOnError(`cancel on ${placementId} (it lapses after its TTL)`))

  const makeLease = (placementId: string, waiterId: string): Lease => {
    const grantedAt = clock.currentTimeMillisUnsafe()
    let released = false
    return {
      placementId,
      release: (outcome: LeaseOutcome) =>
        Effect.suspend(() => {
          if (released) return Effect.void
          released = true
          held.delete(waiterId)
          if (outcome === "cancelled") return cancelOn(placementId, waiterId)
          const now = clock.currentTimeMillisUnsafe()
          // Not awaited: the caller's next step (the settle, a retry's enqueue) goes out on the
          // same connection after it, so it has run by the time that step is answered — one round
          // trip less on the way to the client's answer.
          const { numKeys, keysAndArgs } = placementCall(placementId, now, [waiterId, outcome, failureThreshold, cooldownMs, now - grantedAt])
          redis.sendScript(
            "cqRelease",
            "cqRelease",
            numKeys,
            keysAndArgs,
            (message) => `capacity queues: release on ${placementId} (the slot lapses after its TTL): ${message}`
          )
          return Effect.void
        })
    }
  }

  /**
   * `waiterId` holds a slot on `placementId` (announced, found by SYNC, or answered by ENQUEUE).
   * The first grant of a waiting request resolves it, synchronously, so no second grant can slip
   * in between; any other grant is freed unless it is the same one announced again.
   */
  const onGranted = (placementId: string, waiterId: string) =>
    Effect.suspend(() => {
      const waiter = waiters.get(waiterId)
      if (waiter !== undefined && waiter.lease === undefined) {
        waiter.lease = makeLease(placementId, waiterId)
        held.set(waiterId, placementId)
        Deferred.doneUnsafe(waiter.deferred, Effect.succeed(waiter.lease))
        return Effect.void
      }
      return held.get(waiterId) === placementId ? Effect.void : cancelOn(placementId, waiterId)
    })

  /**
   * Enqueues (again) unless the request was served or left meanwhile. With `skipIfOpen`, a
   * placement whose circuit is open (still cooling down) is left alone and the answer is false:
   * the circuit is read in the same script as the enqueue, so admission costs one round trip.
   */
  const enqueueOn = (placementId: string, waiterId: string, skipIfOpen = false, admission?: PendingAdmission): Effect.Effect<boolean> =>
    Effect.suspend(() => {
      const waiter = waiters.get(waiterId)
      if (waiter === undefined || waiter.lease !== undefined) return Effect.succeed(true)
      waiter.enqueued.add(placementId)
      // Not proven admitted (no ticket taken, or no answer): wait for the admission, then ask again.
      const afterAdmission = admission === undefined
        ? Effect.succeed(true)
        : Effect.andThen(admission.admitted, Effect.suspend(() => enqueueOn(placementId, waiterId, skipIfOpen)))
      const ticketKeys = admission === undefined ? [] : [admissionTicketKey(prefix, admission.ticket)]
      waiter.admitting = admission !== undefined
      return runKeyed("cqEnqueue", placementId, ticketKeys, [waiterId, waiter.keyId, waiterTtlMs, skipIfOpen ? "1" : "0"]).pipe(
        Effect.ensuring(Effect.sync(() => void (waiter.admitting = false))),
        Effect.flatMap((reply) => {
          if (reply === 1) return Effect.as(onGranted(placementId, waiterId), true)
          if (reply === 2) return Effect.sync(() => waiter.enqueued.delete(placementId)).pipe(Effect.as(false))
          if (reply === 3 && admission !== undefined) {
            waiter.enqueued.delete(placementId)
            return afterAdmission
          }
          return Effect.succeed(true)
        }),
        // Failed: without a ticket, SYNC finds it missing and enqueues it again.
        warnOnError(`enqueue on ${placementId}`),
        Effect.flatMap((accepted) => (accepted === undefined ? afterAdmission : Effect.succeed(accepted)))
      )
    })

  const openNow = (placementIds: ReadonlyArray<string>) =>
    Effect.flatMap(Clock.currentTimeMillis, (now) =>
      call("circuit", () => {
        const pipeline = client.pipeline()
        for (const id of placementIds) pipeline.hmget(keysOf.get(id)!.keys[0], "circuit", "openedUntil")
        return pipeline.exec()
      }).pipe(
        Effect.map((replies) =>
          placementIds.map((_, i) => {
            const [error, reply] = replies?.[i] ?? [null, null]
            const [circuit, openedUntil] = (error === null ? reply : null) as [string | null, string | null] | null ?? [null, null]
            return circuit === "open" && now < Number(openedUntil ?? 0)
          })
        ),
        // Unknown health is treated as healthy: the wait itself still goes through Redis.
        Effect.catch(() => Effect.succeed(placementIds.map(() => false)))
      ))

  /** Estimated seconds until `waiterId` would be served on its best target (machines/queue.ts positionOf). */
  const retryHint = (targets: ReadonlyArray<string>, waiterId: string) =>
    Effect.forEach(targets, (placementId) =>
      run("cqPosition", placementId, waiterId).pipe(
        Effect.map((reply) => {
          const [ahead, capacity, holdMs] = reply as [number, number, number]
          const rounds = Math.ceil((Math.max(0, ahead) + 1) / Math.max(1, capacity))
          return (rounds * (holdMs > 0 ? holdMs : 1_000)) / 1_000
        }),
        Effect.catch(() => Effect.succeed(Number.POSITIVE_INFINITY))
      )).pipe(Effect.map((estimates) => {
        const best = Math.min(...estimates)
        return Number.isFinite(best) ? Math.min(600, Math.max(1, Math.ceil(best))) : 1
      }))

  /**
   * Enqueues a new waiter on its candidates; gives back the healthy ones it joined (empty when every
   * circuit was open and it joined them all). Made once, not inside `acquire`: a `function*` made
   * per request keeps the request alive through young-generation collections (see `answer` in
   * http/chat-answer.ts) — here the waiter, and through its admission the call's metering.
   */
  const joinQueues = Effect.fnUntraced(function*(
    known: ReadonlyArray<string>,
    waiterId: string,
    waiter: Waiter,
    firstAdmission: PendingAdmission | undefined
  ) {
    // One candidate waits on its placement whatever the circuit (there is nowhere else to go).
    const skipIfOpen = known.length > 1
    const healthy: Array<string> = []
    // The first enqueue rides behind the admission, if it is still on its way.
    let admission = firstAdmission
    for (const id of known) {
      if (waiter.lease !== undefined) break // granted at once by an earlier target
      if (yield* enqueueOn(id, waiterId, skipIfOpen, admission)) healthy.push(id)
      admission = undefined
    }
    if (waiter.lease === undefined && healthy.length === 0) {
      for (const id of known) {
        if (waiter.lease !== undefined) break
        yield* enqueueOn(id, waiterId)
      }
    }
    return healthy
  })

  // Untraced: on every request's path (a span would capture a stack per call).
  const acquire = Effect.fnUntraced(function*(request: AcquireOptions) {
    const known = request.candidates.filter((id) => keysOf.has(id))
    if (known.length === 0) return yield* Effect.die(new Error(`no capacity queue for ${request.candidates.join(", ")}`))
    const waiterId = `${instanceId}/${++nextWaiter}`
    // A batch waiter's key id carries the class: `!<keyId>` (see queue-lua.ts).
    const waiter: Waiter = { keyId: request.priority === "batch" ? `!${request.keyId}` : request.keyId, deferred: Deferred.makeUnsafe<Lease>(), enqueued: new Set(), lease: undefined, admitting: false }
    waiters.set(waiterId, waiter)
    const startedAt = clock.currentTimeMillisUnsafe()
    const deadlineMs = request.deadlineMs ?? defaultDeadlineMs

    // Leaves every other queue it joined; a lease it got but never handed out goes back.
    const cleanup = (exit: Exit.Exit<Lease, QueueTimeout>) =>
      Effect.suspend(() => {
        waiters.delete(waiterId)
        const others = [...waiter.enqueued].filter((id) => id !== waiter.lease?.placementId)
        return Effect.forEach(others, (id) => cancelOn(id, waiterId), { concurrency: "unbounded", discard: true }).pipe(
          Effect.andThen(Exit.isFailure(exit) && waiter.lease !== undefined ? waiter.lease.release("cancelled") : Effect.void)
        )
      })

    // The placements it waits on: the healthy candidates, or all of them when every circuit is open.
    let targets: ReadonlyArray<string> = known
    const join = Effect.map(joinQueues(known, waiterId, waiter, request.admission), (healthy) => {
      if (healthy.length > 0) targets = healthy
    })
    // The deadline's timer is armed only when the request really waits: a free slot (the common
    // case) is answered by the enqueue itself.
    const waitForGrant = Effect.suspend(() => {
      if (waiter.lease !== undefined) return Effect.succeed(waiter.lease)
      const wait = request.onQueued === undefined ? Deferred.await(waiter.deferred) : Effect.andThen(request.onQueued, Deferred.await(waiter.deferred))
      return wait.pipe(
        Effect.timeoutOrElse({
          duration: Math.max(0, deadlineMs - (clock.currentTimeMillisUnsafe() - startedAt)),
          orElse: () =>
            Effect.flatMap(retryHint(targets, waiterId), (retryAfterSeconds) =>
              Effect.fail(new QueueTimeout({
                message: `No capacity on ${targets.join(", ")} within ${Math.round(deadlineMs / 1000)} s`,
                waitedMs: clock.currentTimeMillisUnsafe() - startedAt,
                retryAfterSeconds
              })))
        })
      )
    })
    return yield* Effect.andThen(join, waitForGrant).pipe(Effect.onExit(cleanup))
  })

  // ---- heartbeat: renew waiters (every tick) and leases (every leaseRenewMs), catch lost grants ----

  const sync = (placementId: string, waiting: ReadonlyArray<string>, leases: ReadonlyArray<string>) =>
    run("cqSync", placementId, waiterTtlMs, waiting.length, ...waiting, ...leases).pipe(
      Effect.flatMap((reply) =>
        Effect.forEach(reply as Array<number>, (status, i) => {
          if (i >= waiting.length) {
            const waiterId = leases[i - waiting.length]
            if (status === 1 || held.get(waiterId) !== placementId) return Effect.void
            held.delete(waiterId) // lapsed during a stall, or Redis lost it: nothing left to renew
            return Effect.logWarning(`capacity queues: lease ${waiterId} on ${placementId} was lost; the call goes on uncounted`)
          }
          if (status === 1) return onGranted(placementId, waiting[i])
          return status === 2 ? enqueueOn(placementId, waiting[i]) : Effect.void
        }, { discard: true })
      ),
      warnOnError(`heartbeat on ${placementId}`)
    )

  const uninitialized = new Set(capacities.keys())
  const initialize = Effect.forEach([...uninitialized], (placementId) =>
    run("cqSetCapacity", placementId, capacities.get(placementId)!).pipe(
      Effect.tap(() => Effect.sync(() => uninitialized.delete(placementId))),
      warnOnError(`storing the capacity of ${placementId}`)
    ), { concurrency: "unbounded", discard: true })

  let lastRenew = clock.currentTimeMillisUnsafe()
  const tick = Effect.gen(function*() {
    if (uninitialized.size > 0) yield* initialize
    const now = clock.currentTimeMillisUnsafe()
    const renewLeases = now - lastRenew >= leaseRenewMs
    if (renewLeases) lastRenew = now
    const work = new Map<string, { waiting: Array<string>; leases: Array<string> }>()
    const entry = (placementId: string) => work.get(placementId) ?? work.set(placementId, { waiting: [], leases: [] }).get(placementId)!
    for (const [waiterId, waiter] of waiters) {
      if (waiter.lease === undefined && !waiter.admitting) for (const placementId of waiter.enqueued) entry(placementId).waiting.push(waiterId)
    }
    if (renewLeases) for (const [waiterId, placementId] of held) entry(placementId).leases.push(waiterId)
    yield* Effect.forEach(work, ([placementId, { waiting, leases }]) => sync(placementId, waiting, leases), { concurrency: "unbounded", discard: true })
  })

  // ---- start: store the capacities, subscribe, start the heartbeat (the client waited for Redis) ----

  yield* initialize

  const announcements = yield* Queue.unbounded<readonly [string, string]>()
  // Until SUBSCRIBE succeeds grants arrive by the heartbeat only; ioredis resubscribes after reconnects.
  const subscribed = yield* redis.subscribe(`${channelPrefix}${instanceId}`, (text) => {
    const at = text.indexOf("\n")
    if (at > 0) Queue.offerUnsafe(announcements, [text.slice(0, at), text.slice(at + 1)] as const)
  })
  yield* Queue.take(announcements).pipe(
    Effect.flatMap(([placementId, waiterId]) => (keysOf.has(placementId) ? onGranted(placementId, waiterId) : Effect.void)),
    Effect.forever,
    Effect.forkIn(scope)
  )
  if (!(yield* subscribed)) yield* Effect.logWarning("capacity queues: grant channel not subscribed yet")
  yield* tick.pipe(
    Effect.catchCause((cause) => Effect.logWarning("capacity queues: heartbeat failed", cause)),
    Effect.repeat(Schedule.spaced(pollIntervalMs)),
    Effect.forkIn(scope)
  )

  // ---- the read side and config changes ----

  const viewOf = (placementId: string) =>
    run("cqView", placementId).pipe(Effect.map((reply): PlacementQueueView => {
      const [capacity, inUse, circuit, ...byKey] = reply as [number, number, CircuitState, ...Array<string | number>]
      const waitingByKey: Record<string, number> = {}
      for (let i = 0; i + 1 < byKey.length; i += 2) {
        const keyId = String(byKey[i]).replace(/^!/, "") // a batch lane counts for its key
        waitingByKey[keyId] = (waitingByKey[keyId] ?? 0) + Number(byKey[i + 1])
      }
      const waiting = Object.values(waitingByKey).reduce((sum, n) => sum + n, 0)
      return { placementId, capacity, inUse, waiting, waitingByKey, circuit }
    }))

  const view = Effect.fn("CapacityQueues.view")(function*() {
    return yield* Effect.forEach([...keysOf.keys()], viewOf, { concurrency: "unbounded" }).pipe(Effect.orDie)
  })
  const isOpen = Effect.fn("CapacityQueues.isOpen")(function*(placementId: string) {
    return keysOf.has(placementId) && (yield* openNow([placementId]))[0]
  })
  const setCapacity = Effect.fn("CapacityQueues.setCapacity")(function*(placementId: string, capacity: number) {
    // The machine ignores a capacity that is not a whole number ≥ 0; so do we.
    if (!keysOf.has(placementId) || !Number.isInteger(capacity) || capacity < 0) return
    capacities.set(placementId, capacity)
    yield* run("cqSetCapacity", placementId, capacity).pipe(Effect.orDie)
  })
  return { acquire, view, isOpen, setCapacity } satisfies CapacityQueuesShape
})
