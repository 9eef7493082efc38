/**
 * Wake-up signals for run logs: "run X's log reached seq N". Only the signal travels, never the
 * events — readers then read `seq > cursor` from SQL, which stays the truth. Waiters wake on the
 * signals alone: in process a signal is never lost, so nothing polls. On Redis a signal can be lost
 * (pub/sub drops messages for slow or reconnecting subscribers), so there a waiter also re-reads
 * every `LOST_SIGNAL_RECHECK_MS` (`recheckMs`): a lost signal only adds that latency.
 *
 * `REDIS_URL` set → published on one Redis channel (`<GATEWAY_REDIS_PREFIX>run-signals`) that every instance subscribes to, so a
 * subscriber on instance A wakes when instance B appends; always also delivered in process.
 */
import { Context, Effect, Layer, type Scope } from "effect"
import { Redis } from "ioredis"
import { Settings } from "../config/settings.ts"
import { awaitReady } from "./redis.ts"
import { KEY_PREFIX } from "./types.ts"

export interface RunSignal {
  readonly runId: string
  readonly lastSeq: number
}

export interface SignalSubscription {
  /**
   * Resolves true at the next signal for the run (or one that arrived since the last wait); with
   * `timeoutMs`, false once that much time passed on Effect's clock (so a TestClock drives it).
   */
  wait(timeoutMs?: number): Effect.Effect<boolean>
}

/** How often a waiter re-reads SQL when signals can be lost (Redis); see the header. */
export const LOST_SIGNAL_RECHECK_MS = 5_000

const channelFor = (prefix: string) => `${prefix}run-signals`

/** In-process fan-out: one listener set per run. */
const makeLocalBus = () => {
  const listeners = new Map<string, Set<() => void>>()
  const deliver = (signal: RunSignal) => {
    for (const listener of listeners.get(signal.runId) ?? []) listener()
  }
  const subscribe = (runId: string): Effect.Effect<SignalSubscription, never, Scope.Scope> =>
    Effect.gen(function*() {
      let pending = false
      let wake: (() => void) | undefined
      const listener = () => {
        pending = true
        wake?.()
      }
      yield* Effect.acquireRelease(
        Effect.sync(() => {
          const set = listeners.get(runId) ?? new Set()
          set.add(listener)
          listeners.set(runId, set)
        }),
        () =>
          Effect.sync(() => {
            const set = listeners.get(runId)
            set?.delete(listener)
            if (set?.size === 0) listeners.delete(runId)
          })
      )
      const signalled = Effect.callback<boolean>((resume) => {
        if (pending) {
          pending = false
          return resume(Effect.succeed(true))
        }
        wake = () => {
          wake = undefined
          pending = false
          resume(Effect.succeed(true))
        }
        return Effect.sync(() => {
          wake = undefined
        })
      })
      const wait = (timeoutMs?: number) =>
        timeoutMs === undefined ? signalled : Effect.timeoutOrElse(signalled, { duration: timeoutMs, orElse: () => Effect.succeed(false) })
      return { wait }
    })
  return { deliver, subscribe }
}

export class RunSignals extends Context.Service<RunSignals, {
  readonly kind: "in-process" | "redis"
  /** Best effort; never fails. */
  publish(signal: RunSignal): Effect.Effect<void>
  subscribe(runId: string): Effect.Effect<SignalSubscription, never, Scope.Scope>
}>()("gateway/coordination/RunSignals") {
  static readonly layerInProcess = Layer.sync(RunSignals, () => {
    const bus = makeLocalBus()
    return RunSignals.of({ kind: "in-process", publish: (signal) => Effect.sync(() => bus.deliver(signal)), subscribe: bus.subscribe })
  })

  static readonly layerRedis = (url: string, prefix: string = KEY_PREFIX) =>
    Layer.effect(RunSignals, Effect.gen(function*() {
      const bus = makeLocalBus()
      const connect = (role: string) =>
        Effect.acquireRelease(
          Effect.sync(() => {
            const redis = new Redis(url, { maxRetriesPerRequest: 1, retryStrategy: (attempt) => Math.min(attempt * 200, 2_000) })
            let lastLog = 0
            redis.on("error", (error: Error) => {
              if (Date.now() - lastLog < 10_000) return
              lastLog = Date.now()
              console.warn(`run signals (${role}): redis error: ${error.message}`)
            })
            return redis
          }),
          (redis) => Effect.promise(() => redis.quit().catch(() => redis.disconnect())).pipe(Effect.ignore)
        )
      const subscriber = yield* connect("subscriber")
      const publisher = yield* connect("publisher")
      yield* awaitReady(subscriber, 5_000, `run signals: redis not ready at start (${url}); subscribers will poll`)
      subscriber.on("message", (_channel: string, message: string) => {
        try {
          const signal = JSON.parse(message) as RunSignal
          if (typeof signal.runId === "string") bus.deliver(signal)
        } catch {
          // a malformed message wakes nobody
        }
      })
      // ioredis re-subscribes by itself after a reconnect; a failure here only leaves polling.
      yield* Effect.tryPromise(() => subscriber.subscribe(channelFor(prefix))).pipe(
        Effect.timeout(5_000),
        Effect.catchCause((cause) => Effect.logWarning("run signals: cannot subscribe; subscribers will poll", cause))
      )
      const publish = (signal: RunSignal) =>
        Effect.sync(() => {
          bus.deliver(signal)
          publisher.publish(channelFor(prefix), JSON.stringify(signal)).catch(() => undefined)
        })
      return RunSignals.of({ kind: "redis", publish, subscribe: bus.subscribe })
    }))

  /** Redis when `REDIS_URL` is set, in process otherwise. */
  static readonly layer = Layer.unwrap(Effect.gen(function*() {
    const { redisUrl, redisPrefix } = yield* Settings
    return redisUrl === undefined ? RunSignals.layerInProcess : RunSignals.layerRedis(redisUrl, redisPrefix)
  }))
}

/**
 * How long a waiter may wait for a signal before it re-reads SQL: never in process (no signal is
 * lost there), `LOST_SIGNAL_RECHECK_MS` on Redis.
 */
export const recheckMs = (signals: RunSignals["Service"]): number | undefined =>
  signals.kind === "in-process" ? undefined : LOST_SIGNAL_RECHECK_MS
