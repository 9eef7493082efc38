/**
 * Wake-up signals for run logs: "run X's log reached seq N". Only the signal travels, never the
 * events — readers then read `seq > cursor` from SQL, which stays the truth. Waiters wake on the
 * signals alone: in process a signal is never lost, so nothing polls. On Redis a signal can be lost
 * (pub/sub drops messages for slow or reconnecting subscribers), so there a waiter also re-reads
 * every `LOST_SIGNAL_RECHECK_MS` (`recheckMs`): a lost signal only adds that latency.
 *
 * `REDIS_URL` set → published on one Redis channel (`<GATEWAY_REDIS_PREFIX>run-signals`) that
 * every instance subscribes to (over the shared RedisClient), so a subscriber on instance A wakes
 * when instance B appends; always also delivered in process.
 */
import { Context, Effect, Layer, type Scope } from "effect"
import { Settings } from "../config/settings.ts"
import { RedisClient } from "./redis-client.ts"
import { KEY_PREFIX } from "./types.ts"
import { KeyedSets } from "../util/keyed-sets.ts"

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
const LOST_SIGNAL_RECHECK_MS = 5_000

const channelFor = (prefix: string) => `${prefix}run-signals`

/** In-process fan-out: one listener set per run. */
const makeLocalBus = () => {
  const listeners = new KeyedSets<string, () => void>()
  const deliver = (signal: RunSignal) => {
    for (const listener of listeners.get(signal.runId)) listener()
  }
  const subscribe = Effect.fnUntraced(function*(runId: string): Effect.fn.Return<SignalSubscription, never, Scope.Scope> {
    let pending = false
    let wake: (() => void) | undefined
    const listener = () => {
      pending = true
      wake?.()
    }
    yield* Effect.acquireRelease(
      Effect.sync(() => listeners.add(runId, listener)),
      () => Effect.sync(() => listeners.delete(runId, listener))
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

  /** Redis, on the RedisClient of the context: publishes on its command connection, listens on its subscriber. */
  static readonly layerOnRedisClient = Layer.effect(RunSignals, Effect.gen(function*() {
    const redis = yield* RedisClient
    const bus = makeLocalBus()
    const channel = channelFor(redis.prefix)
    const subscribed = yield* redis.subscribe(channel, (message) => {
      try {
        const signal = JSON.parse(message) as RunSignal
        if (typeof signal.runId === "string") bus.deliver(signal)
      } catch {
        // a malformed message wakes nobody
      }
    })
    if (!(yield* subscribed)) yield* Effect.logWarning("run signals: not subscribed yet; subscribers poll until then")
    const publish = (signal: RunSignal) =>
      Effect.sync(() => {
        bus.deliver(signal)
        redis.client.publish(channel, JSON.stringify(signal)).catch(() => undefined)
      })
    return RunSignals.of({ kind: "redis", publish, subscribe: bus.subscribe })
  }))

  /** Redis at `url` on a client of its own, which closes with the layer. */
  static readonly layerRedis = (url: string, prefix: string = KEY_PREFIX) =>
    RunSignals.layerOnRedisClient.pipe(Layer.provide(RedisClient.layer({ url, prefix })))

  /** Redis when `REDIS_URL` is set, in process otherwise. */
  static readonly layer = Layer.unwrap(Effect.gen(function*() {
    const { redisUrl } = yield* Settings
    return redisUrl === undefined
      ? RunSignals.layerInProcess
      : RunSignals.layerOnRedisClient.pipe(Layer.provide(RedisClient.layerFromSettings))
  }))
}

/**
 * How long a waiter may wait for a signal before it re-reads SQL: never in process (no signal is
 * lost there), `LOST_SIGNAL_RECHECK_MS` on Redis.
 */
export const recheckMs = (signals: RunSignals["Service"]): number | undefined =>
  signals.kind === "in-process" ? undefined : LOST_SIGNAL_RECHECK_MS
