/**
 * Hosts the capacity queue of every placement (machines/queue.ts, a pure transition function)
 * and turns it into an Effect API: `acquire` waits for a slot (never a 429), `Lease.release`
 * gives it back and reports the call's health, `view` feeds GET /admin/v1/queues.
 *
 * A request waits on all its eligible candidates at once and takes the first slot granted on any
 * of them; it is then cancelled on the others (a grant that still arrives is freed at once).
 * Eligible = candidates whose circuit is not open; when every candidate is open the request waits
 * on all of them, to be served by their half-open probes. Every step is synchronous and its grants
 * are handed out before it returns, so there is no window where a slot is granted to a waiter
 * that has already gone. A request that finds a free slot is served at once: no deadline timer,
 * no Deferred.
 *
 * The interface (capacity-queue-types.ts) is all Effects and leases so that a Redis-backed layer
 * can implement it for several instances (see the note at the end of this file).
 */
import { Clock, Context, Deferred, Effect, Exit, FiberSet, Layer } from "effect"
import { positionOf, type QueueEvent, type QueueState, queueView, startQueue, stepQueue } from "../../machines/queue.ts"
import { Catalog } from "../catalog/catalog.ts"
import { Settings } from "../config/settings.ts"
import {
  type AcquireOptions,
  type CapacityQueuesOptions,
  type CapacityQueuesShape,
  DEFAULT_DEADLINE_MS,
  DEFAULT_PROBE_COOLDOWN_MS,
  type Lease,
  QueueTimeout
} from "./capacity-queue-types.ts"
import { RedisClient } from "../coordination/redis-client.ts"
import { makeRedisCapacityQueues, makeRedisCapacityQueuesOn, type OwnClientQueuesOptions } from "./redis-capacity-queues.ts"

/** Builds the in-process queues; the actors stop when the enclosing scope closes. */
const makeCapacityQueues = Effect.fnUntraced(function*(options: CapacityQueuesOptions) {
  const clock = yield* Clock.Clock
  const cooldownMs = options.probeCooldownMs ?? DEFAULT_PROBE_COOLDOWN_MS
  const defaultDeadlineMs = options.defaultDeadlineMs ?? DEFAULT_DEADLINE_MS
  // waiterId → what to do when one of its queues grants it a slot
  const onGrant = new Map<string, (placementId: string) => void>()
  // mean time a slot is held, per placement (for the QueueTimeout hint)
  const meanHoldMs = new Map<string, number>()
  let nextWaiter = 0

  const queues = new Map<string, QueueState>(options.placements.map(({ placementId, capacity }) => [
    placementId,
    startQueue({ capacity, ...(options.failureThreshold === undefined ? {} : { failureThreshold: options.failureThreshold }) })
  ]))
  let stopped = false
  yield* Effect.addFinalizer(() => Effect.sync(() => void (stopped = true)))

  // The host's half of the circuit: each time a queue opens, let it probe after the cooldown.
  const runFork = yield* FiberSet.makeRuntime<never>()
  const scheduleProbe = (placementId: string) =>
    runFork(Effect.sleep(cooldownMs).pipe(Effect.andThen(Effect.sync(() => send(placementId, { type: "CIRCUIT_PROBE_DUE" })))))

  /**
   * Applies one event to a placement's queue and hands out its grants. A grant whose waiter is
   * gone (nobody listens) is freed at once, which may grant the next waiter: hence the loop.
   */
  const send = (placementId: string, event: QueueEvent): void => {
    if (stopped) return
    const before = queues.get(placementId)!
    const { state, granted } = stepQueue(before, event)
    queues.set(placementId, state)
    if (state.value === "open" && before.value !== "open") scheduleProbe(placementId)
    for (const waiterId of granted) {
      const handler = onGrant.get(waiterId)
      if (handler === undefined) send(placementId, { type: "CANCEL", waiterId })
      else handler(placementId)
    }
  }

  const circuitOf = (placementId: string) => queues.get(placementId)!.value

  const makeLease = (placementId: string, waiterId: string): Lease => {
    const grantedAt = clock.currentTimeMillisUnsafe()
    let released = false
    return {
      placementId,
      release: (outcome) =>
        Effect.suspend(() => {
          if (released) return Effect.void
          released = true
          if (outcome === "cancelled") send(placementId, { type: "CANCEL", waiterId })
          else {
            const held = clock.currentTimeMillisUnsafe() - grantedAt
            meanHoldMs.set(placementId, 0.8 * (meanHoldMs.get(placementId) ?? held) + 0.2 * held)
            send(placementId, { type: "RELEASE", waiterId, outcome })
          }
          return Effect.void
        })
    }
  }

  /** Estimated seconds until `waiterId` would be served on its best target. */
  const retryHint = (targets: ReadonlyArray<string>, waiterId: string) => {
    const estimates = targets.map((placementId) => {
      const { context } = queues.get(placementId)!
      const rounds = Math.ceil(((positionOf(context, waiterId) ?? 0) + 1) / Math.max(1, context.capacity))
      return (rounds * (meanHoldMs.get(placementId) ?? 1_000)) / 1_000
    })
    return Math.min(600, Math.max(1, Math.ceil(Math.min(...estimates))))
  }

  // In process nothing rides on the admission's round trip: wait for it, then ask.
  const acquire = (request: AcquireOptions): Effect.Effect<Lease, QueueTimeout> =>
    request.admission === undefined
      ? acquireNow(request)
      : Effect.andThen(request.admission.admitted, acquireNow(request))

  const acquireNow = (request: AcquireOptions): Effect.Effect<Lease, QueueTimeout> => Effect.suspend(() => {
    const known = request.candidates.filter((id) => queues.has(id))
    if (known.length === 0) return Effect.die(new Error(`no capacity queue for ${request.candidates.join(", ")}`))
    const healthy = known.filter((id) => circuitOf(id) !== "open")
    const targets = healthy.length > 0 ? healthy : known
    const waiterId = `w${++nextWaiter}`
    let lease: Lease | undefined
    let granted: Deferred.Deferred<Lease> | undefined

    onGrant.set(waiterId, (placementId) => {
      if (lease !== undefined) return send(placementId, { type: "CANCEL", waiterId }) // lost the race
      lease = makeLease(placementId, waiterId)
      for (const other of targets) if (other !== placementId) send(other, { type: "CANCEL", waiterId })
      if (granted !== undefined) Deferred.doneUnsafe(granted, Effect.succeed(lease))
    })
    for (const id of targets) {
      if (lease !== undefined) break // granted at once by an earlier target
      send(id, { type: "ENQUEUE", waiterId, keyId: request.keyId, ...(request.priority === "batch" ? { priority: "batch" } : {}) })
    }
    if (lease !== undefined) {
      // A free slot: served at once, without arming the deadline.
      onGrant.delete(waiterId)
      return Effect.succeed(lease)
    }

    const waiting = Deferred.makeUnsafe<Lease>()
    granted = waiting
    const startedAt = clock.currentTimeMillisUnsafe()
    const deadlineMs = request.deadlineMs ?? defaultDeadlineMs
    const cleanup = (exit: Exit.Exit<Lease, QueueTimeout>) =>
      Effect.suspend(() => {
        onGrant.delete(waiterId)
        if (Exit.isSuccess(exit)) return Effect.void
        for (const id of targets) if (id !== lease?.placementId) send(id, { type: "CANCEL", waiterId })
        return lease === undefined ? Effect.void : lease.release("cancelled") // granted, never handed out
      })
    const wait = request.onQueued === undefined
      ? Deferred.await(waiting)
      : Effect.andThen(request.onQueued, Deferred.await(waiting))
    return wait.pipe(
      Effect.timeoutOrElse({
        duration: deadlineMs,
        orElse: () =>
          Effect.fail(new QueueTimeout({
            message: `No capacity on ${targets.join(", ")} within ${Math.round(deadlineMs / 1000)} s`,
            waitedMs: clock.currentTimeMillisUnsafe() - startedAt,
            retryAfterSeconds: retryHint(targets, waiterId)
          }))
      }),
      Effect.onExit(cleanup)
    )
  })

  const view = Effect.fn("CapacityQueues.view")(function*() {
    return [...queues].map(([placementId, state]) => ({ placementId, ...queueView(state) }))
  })
  const isOpen = Effect.fn("CapacityQueues.isOpen")(function*(placementId: string) {
    return queues.has(placementId) && circuitOf(placementId) === "open"
  })
  const setCapacity = Effect.fn("CapacityQueues.setCapacity")(function*(placementId: string, capacity: number) {
    if (queues.has(placementId)) send(placementId, { type: "CAPACITY", capacity })
  })
  return { acquire, view, isOpen, setCapacity } satisfies CapacityQueuesShape
})

export class CapacityQueues extends Context.Service<CapacityQueues, CapacityQueuesShape>()("gateway/runtime/CapacityQueues") {
  /**
   * One queue per catalog placement, sized by its configured `capacity`: shared by every instance
   * on Redis when `REDIS_URL` is set (redis-capacity-queues.ts, keys under `GATEWAY_REDIS_PREFIX`),
   * in process otherwise.
   */
  static readonly layer = Layer.unwrap(Effect.gen(function*() {
    const { redisUrl, circuitCooldownMs, queueMaxWaitMs } = yield* Settings
    const optionsFrom = Effect.gen(function*() {
      const catalog = yield* Catalog
      const placements = [...catalog.placements.values()].map(({ placement }) => ({ placementId: placement.id, capacity: placement.capacity }))
      return { placements, probeCooldownMs: circuitCooldownMs, defaultDeadlineMs: queueMaxWaitMs }
    })
    if (redisUrl === undefined) {
      return Layer.effect(CapacityQueues, Effect.flatMap(optionsFrom, makeCapacityQueues).pipe(Effect.map((queues) => CapacityQueues.of(queues))))
    }
    // The gateway's shared RedisClient (one value: coordination and run signals use the same).
    return Layer.effect(CapacityQueues, Effect.gen(function*() {
      return CapacityQueues.of(yield* makeRedisCapacityQueuesOn(yield* RedisClient, yield* optionsFrom))
    })).pipe(Layer.provide(RedisClient.layerFromSettings))
  }))

  /** On Redis at `url`, shared with every instance using the same Redis and key prefix; the connections close with the layer. */
  static readonly layerRedis = (url: string, options: OwnClientQueuesOptions) =>
    Layer.effect(CapacityQueues, Effect.map(makeRedisCapacityQueues(url, options), (queues) => CapacityQueues.of(queues)))

  /** Explicit placements and timings, for tests and embedders. */
  static readonly layerTest = (options: CapacityQueuesOptions) =>
    Layer.effect(CapacityQueues, Effect.map(makeCapacityQueues(options), (queues) => CapacityQueues.of(queues)))
}

/* The Redis-backed host (several instances) is redis-capacity-queues.ts, its scripts queue-lua.ts. */
