/**
 * Readiness: can this instance serve? The database answers a trivial query, and Redis (when
 * `REDIS_URL` is set) answers PING. Each check has its own short timeout, so a hung dependency
 * makes the probe answer "not ready" quickly instead of hanging the load balancer's probe.
 *
 * Redis is asked over the gateway's shared command connection (coordination/redis-client.ts),
 * which has no offline queue and a one-second command timeout: the probe sees what the runtime's
 * commands see.
 */
import { Cause, Context, Duration, Effect, Layer } from "effect"
import { SqlClient } from "effect/sql"
import { Settings } from "../config/settings.ts"
import { RedisClient, type RedisClientShape } from "../coordination/redis-client.ts"

type ReadinessCheck =
  | { readonly status: "ok"; readonly latencyMs: number }
  | { readonly status: "unreachable"; readonly error: string }

export interface ReadinessReport {
  readonly ready: boolean
  readonly checks: {
    readonly database: ReadinessCheck
    /** Absent when the gateway runs without Redis. */
    readonly redis?: ReadinessCheck
  }
}

const CHECK_TIMEOUT = Duration.seconds(2)

const timed = Effect.fnUntraced(function*<E>(what: string, effect: Effect.Effect<unknown, E>) {
  const started = performance.now()
  return yield* effect.pipe(
    Effect.timeout(CHECK_TIMEOUT),
    Effect.map((): ReadinessCheck => ({ status: "ok", latencyMs: Math.round((performance.now() - started) * 10) / 10 })),
    Effect.catchCause((cause) => {
      const failure = Cause.squash(cause)
      const message = Cause.isTimeoutError(failure)
        ? `no answer within ${Duration.toMillis(CHECK_TIMEOUT)} ms`
        : failure instanceof Error ? failure.message : String(failure)
      return Effect.succeed<ReadinessCheck>({ status: "unreachable", error: `${what}: ${message}` })
    })
  )
})

/** The probe; `redis` is the gateway's shared client, absent when it runs without Redis. */
const make = Effect.fnUntraced(function*(redis: RedisClientShape | undefined) {
  const sql = yield* SqlClient.SqlClient
  const database = timed("database", sql`SELECT 1`)
  const ping = redis === undefined ? undefined : timed("redis", redis.use("ping", (client) => client.ping()))

  const check = Effect.fn("Readiness.check")(function*() {
    const [db, rd] = yield* Effect.all([database, ping ?? Effect.succeed(undefined)], { concurrency: "unbounded" })
    const ready = db.status === "ok" && (rd === undefined || rd.status === "ok")
    return { ready, checks: { database: db, ...(rd === undefined ? {} : { redis: rd }) } } satisfies ReadinessReport
  })

  return Readiness.of({ check })
})

export class Readiness extends Context.Service<Readiness, {
  check(): Effect.Effect<ReadinessReport>
}>()("gateway/health/Readiness") {
  static readonly layer = Layer.unwrap(Effect.gen(function*() {
    const { redisUrl } = yield* Settings
    return redisUrl === undefined
      ? Layer.effect(Readiness, make(undefined))
      : Layer.effect(Readiness, Effect.gen(function*() {
        return yield* make(yield* RedisClient)
      })).pipe(Layer.provide(RedisClient.layerFromSettings))
  }))
}
