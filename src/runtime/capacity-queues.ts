/**
 * Hosts one capacity-queue actor (machines/queue.ts) per placement and turns it into an Effect
 * API: `acquire` waits for a slot (never a 429), `Lease.release` gives it back and reports the
 * call's health, `view` feeds GET /admin/v1/queues.
 *
 * A request waits on all its eligible candidates at once and takes the first slot granted on any
 * of them; it is then cancelled on the others (a grant that still arrives is freed at once).
 * Eligible = candidates whose circuit is not open; when every candidate is open the request waits
 * on all of them, to be served by their half-open probes. The actors are driven synchronously
 * (XState delivers `granted` inside `send`), so there is no window where a slot is granted to a
 * waiter that has already gone.
 *
 * The interface is all Effects and leases so that a Redis-backed layer can implement it for
 * several instances (see the note at the end of this file).
 */
import { Clock, Context, Deferred, Effect, Exit, FiberSet, Layer, Schema } from "effect"
import { createActor } from "xstate"
import { positionOf, queueMachine, queueView, type QueueView, type ReleaseOutcome } from "../../machines/queue.ts"
import { Catalog } from "../catalog/catalog.ts"
import { Settings } from "../config/settings.ts"
import { makeRedisCapacityQueues, type RedisCapacityQueuesOptions } from "./redis-capacity-queues.ts"

/** No slot came free on any candidate before the deadline. */
export class QueueTimeout extends Schema.TaggedError<QueueTimeout>()("QueueTimeout", {
  message: Schema.String,
  waitedMs: Schema.Number,
  /** A hint for the client's `retry-after`: the estimated wait for the position it had. */
  retryAfterSeconds: Schema.Int
}) {}

/** `cancelled` frees the slot without a health verdict (client gone, lost race). */
export type LeaseOutcome = ReleaseOutcome | "cancelled"

export interface Lease {
  readonly placementId: string
  /** Gives the slot back; idempotent (only the first call counts). */
  release(outcome: LeaseOutcome): Effect.Effect<void>
}

export interface AcquireOptions {
  /** Placement ids in preference order. */
  readonly candidates: ReadonlyArray<string>
  /** The fairness key (the API key's id): round-robin between keys, FIFO within one. */
  readonly keyId: string
  /** The longest this wait may take, in milliseconds (default: the service's, 10 minutes). */
  readonly deadlineMs?: number | undefined
  /** Runs once if no slot was free at once, e.g. to send headers and start keepalives. */
  readonly onQueued?: Effect.Effect<void> | undefined
}

export interface PlacementQueueView extends QueueView {
  readonly placementId: string
}

export interface CapacityQueuesOptions {
  readonly placements: ReadonlyArray<{ readonly placementId: string; readonly capacity: number }>
  /** Consecutive failures that open a circuit (default 3). */
  readonly failureThreshold?: number | undefined
  /** How long an open circuit waits before a half-open probe (default 30 s). */
  readonly probeCooldownMs?: number | undefined
  /** Default `deadlineMs` of `acquire` (default 10 minutes). */
  readonly defaultDeadlineMs?: number | undefined
}

export const DEFAULT_DEADLINE_MS = 10 * 60_000
export const DEFAULT_PROBE_COOLDOWN_MS = 30_000

export interface CapacityQueuesShape {
  acquire(options: AcquireOptions): Effect.Effect<Lease, QueueTimeout>
  view(): Effect.Effect<ReadonlyArray<PlacementQueueView>>
  isOpen(placementId: string): Effect.Effect<boolean>
  /** Config change: more capacity grants at once; less preempts nobody. */
  setCapacity(placementId: string, capacity: number): Effect.Effect<void>
}

/** Builds the in-process queues; the actors stop when the enclosing scope closes. */
export const makeCapacityQueues = Effect.fnUntraced(function*(options: CapacityQueuesOptions) {
  const clock = yield* Clock.Clock
  const cooldownMs = options.probeCooldownMs ?? DEFAULT_PROBE_COOLDOWN_MS
  const defaultDeadlineMs = options.defaultDeadlineMs ?? DEFAULT_DEADLINE_MS
  // waiterId → what to do when one of its queues grants it a slot
  const onGrant = new Map<string, (placementId: string) => void>()
  // mean time a slot is held, per placement (for the QueueTimeout hint)
  const meanHoldMs = new Map<string, number>()
  let nextWaiter = 0

  const actors = new Map(options.placements.map(({ placementId, capacity }) => {
    const actor = createActor(queueMachine, {
      input: { capacity, ...(options.failureThreshold === undefined ? {} : { failureThreshold: options.failureThreshold }) }
    })
    actor.on("granted", ({ waiterId }) => {
      const handler = onGrant.get(waiterId)
      if (handler === undefined) actor.send({ type: "CANCEL", waiterId }) // nobody listens: free it
      else handler(placementId)
    })
    return [placementId, actor.start()] as const
  }))
  yield* Effect.addFinalizer(() => Effect.sync(() => actors.forEach((actor) => actor.stop())))

  // The host's half of the circuit: each time a queue opens, let it probe after the cooldown.
  // Watched on the actor rather than after our own sends, because a send made while the actor
  // is still processing another event (a grant's handler releasing at once) is queued by XState
  // and its transition lands after `send` returns.
  const runFork = yield* FiberSet.makeRuntime<never>()
  for (const [placementId, actor] of actors) {
    let previous = actor.getSnapshot().value
    actor.subscribe((snapshot) => {
      if (snapshot.value === "open" && previous !== "open") {
        runFork(Effect.sleep(cooldownMs).pipe(Effect.andThen(Effect.sync(() => actors.get(placementId)!.send({ type: "CIRCUIT_PROBE_DUE" })))))
      }
      previous = snapshot.value
    })
  }

  const circuitOf = (placementId: string) => queueView(actors.get(placementId)!.getSnapshot()).circuit

  const makeLease = (placementId: string, waiterId: string): Lease => {
    const grantedAt = clock.currentTimeMillisUnsafe()
    let released = false
    return {
      placementId,
      release: (outcome) =>
        Effect.suspend(() => {
          if (released) return Effect.void
          released = true
          const actor = actors.get(placementId)!
          if (outcome === "cancelled") actor.send({ type: "CANCEL", waiterId })
          else {
            const held = clock.currentTimeMillisUnsafe() - grantedAt
            meanHoldMs.set(placementId, 0.8 * (meanHoldMs.get(placementId) ?? held) + 0.2 * held)
            actor.send({ type: "RELEASE", waiterId, outcome })
          }
          return Effect.void
        })
    }
  }

  /** Estimated seconds until `waiterId` would be served on its best target. */
  const retryHint = (targets: ReadonlyArray<string>, waiterId: string) => {
    const estimates = targets.map((placementId) => {
      const { context } = actors.get(placementId)!.getSnapshot()
      const rounds = Math.ceil(((positionOf(context, waiterId) ?? 0) + 1) / Math.max(1, context.capacity))
      return (rounds * (meanHoldMs.get(placementId) ?? 1_000)) / 1_000
    })
    return Math.min(600, Math.max(1, Math.ceil(Math.min(...estimates))))
  }

  const acquire = Effect.fn("CapacityQueues.acquire")(function*(request: AcquireOptions) {
    const known = request.candidates.filter((id) => actors.has(id))
    if (known.length === 0) return yield* Effect.die(new Error(`no capacity queue for ${request.candidates.join(", ")}`))
    const healthy = known.filter((id) => circuitOf(id) !== "open")
    const targets = healthy.length > 0 ? healthy : known
    const waiterId = `w${++nextWaiter}`
    const granted = Deferred.makeUnsafe<Lease>()
    const startedAt = clock.currentTimeMillisUnsafe()
    const deadlineMs = request.deadlineMs ?? defaultDeadlineMs
    let lease: Lease | undefined

    onGrant.set(waiterId, (placementId) => {
      if (lease !== undefined) return actors.get(placementId)!.send({ type: "CANCEL", waiterId }) // lost the race
      lease = makeLease(placementId, waiterId)
      for (const other of targets) if (other !== placementId) actors.get(other)!.send({ type: "CANCEL", waiterId })
      Deferred.doneUnsafe(granted, Effect.succeed(lease))
    })
    const cleanup = (exit: Exit.Exit<Lease, QueueTimeout>) =>
      Effect.suspend(() => {
        onGrant.delete(waiterId)
        if (Exit.isSuccess(exit)) return Effect.void
        for (const id of targets) if (id !== lease?.placementId) actors.get(id)!.send({ type: "CANCEL", waiterId })
        return lease === undefined ? Effect.void : lease.release("cancelled") // granted, never handed out
      })

    const wait = Effect.gen(function*() {
      for (const id of targets) {
        if (lease !== undefined) break // granted at once by an earlier target
        actors.get(id)!.send({ type: "ENQUEUE", waiterId, keyId: request.keyId })
      }
      if (lease === undefined && request.onQueued !== undefined) yield* request.onQueued
      return yield* Deferred.await(granted)
    })
    return yield* wait.pipe(
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
    return [...actors].map(([placementId, actor]) => ({ placementId, ...queueView(actor.getSnapshot()) }))
  })
  const isOpen = Effect.fn("CapacityQueues.isOpen")(function*(placementId: string) {
    return actors.has(placementId) && circuitOf(placementId) === "open"
  })
  const setCapacity = Effect.fn("CapacityQueues.setCapacity")(function*(placementId: string, capacity: number) {
    actors.get(placementId)?.send({ type: "CAPACITY", capacity })
  })
  return { acquire, view, isOpen, setCapacity } satisfies CapacityQueuesShape
})

export class CapacityQueues extends Context.Service<CapacityQueues, CapacityQueuesShape>()("gateway/runtime/CapacityQueues") {
  /**
   * One queue per catalog placement, sized by its configured `capacity`: shared by every instance
   * on Redis when `REDIS_URL` is set (redis-capacity-queues.ts, keys under `GATEWAY_REDIS_PREFIX`),
   * in process otherwise.
   */
  static readonly layer = Layer.effect(CapacityQueues, Effect.gen(function*() {
    const catalog = yield* Catalog
    const { redisUrl, redisPrefix, circuitCooldownMs, queueMaxWaitMs } = yield* Settings
    const placements = [...catalog.placements.values()].map(({ placement }) => ({ placementId: placement.id, capacity: placement.capacity }))
    const options = { placements, probeCooldownMs: circuitCooldownMs, defaultDeadlineMs: queueMaxWaitMs }
    return CapacityQueues.of(yield* (redisUrl === undefined
      ? makeCapacityQueues(options)
      : makeRedisCapacityQueues(redisUrl, { ...options, prefix: redisPrefix })))
  }))

  /** On Redis at `url`, shared with every instance using the same Redis and key prefix; the connections close with the layer. */
  static readonly layerRedis = (url: string, options: RedisCapacityQueuesOptions) =>
    Layer.effect(CapacityQueues, Effect.map(makeRedisCapacityQueues(url, options), (queues) => CapacityQueues.of(queues)))

  /** Explicit placements and timings, for tests and embedders. */
  static readonly layerTest = (options: CapacityQueuesOptions) =>
    Layer.effect(CapacityQueues, Effect.map(makeCapacityQueues(options), (queues) => CapacityQueues.of(queues)))
}

/* The Redis-backed host (several instances) is redis-capacity-queues.ts, its scripts queue-lua.ts. */
