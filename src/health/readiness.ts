/**
 * Readiness: can this instance serve? The database answers a trivial query, and Redis (when
 * `REDIS_URL` is set) answers PING. Each check has its own short timeout, so a hung dependency
 * makes the probe answer "not ready" quickly instead of hanging the load balancer's probe.
 *
 * Redis is asked over a connection of its own (no offline queue, one-second command timeout):
 * the runtime's connections queue and retry by design, which is not what a probe should see.
 */
import { Cause, Context, Duration, Effect, Layer } from "effect"
import { SqlClient } from "effect/sql"
import { Redis } from "ioredis"
import { Settings } from "../config/settings.ts"

export type ReadinessCheck =
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

const timed = <E>(what: string, effect: Effect.Effect<unknown, E>) =>
  Effect.gen(function*() {
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

export class Readiness extends Context.Service<Readiness, {
  check(): Effect.Effect<ReadinessReport>
}>()("gateway/health/Readiness") {
  static readonly layer = Layer.effect(Readiness, Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const { redisUrl } = yield* Settings
    const redis = redisUrl === undefined ? undefined : yield* Effect.acquireRelease(
      Effect.sync(() => {
        const client = new Redis(redisUrl, {
          enableOfflineQueue: false,
          maxRetriesPerRequest: 0,
          commandTimeout: 1_000,
          connectTimeout: 2_000,
          retryStrategy: (attempt) => Math.min(attempt * 200, 2_000)
        })
        // The runtime's own Redis clients already log outages; this one only answers probes.
        client.on("error", () => {})
        return client
      }),
      (client) => Effect.promise(() => client.quit().catch(() => client.disconnect())).pipe(Effect.ignore)
    )

    const database = timed("database", sql`SELECT 1`)
    const ping = redis === undefined ? undefined : timed("redis", Effect.tryPromise({ try: () => redis.ping(), catch: (error) => error }))

    const check = Effect.fn("Readiness.check")(function*() {
      const [db, rd] = yield* Effect.all([database, ping ?? Effect.succeed(undefined)], { concurrency: "unbounded" })
      const ready = db.status === "ok" && (rd === undefined || rd.status === "ok")
      return { ready, checks: { database: db, ...(rd === undefined ? {} : { redis: rd }) } } satisfies ReadinessReport
    })

    return Readiness.of({ check })
  }))
}
