/**
 * One Prometheus scrape: reads the state-like figures (every placement's queue and circuit, stored
 * runs by status, the event loop) and renders every series. Served at `GET /metrics` (admin token)
 * and, with `GATEWAY_METRICS_PORT`, on a listener of its own without credentials.
 *
 * Batches: when the batches feature lands, count its rows by status in `storedByStatus` below (one
 * more `GROUP BY` next to the runs') and pass them as `batchesByStatus`: the series
 * `gateway_batches{status}` is already rendered from it.
 */
import { Context, Effect, Layer } from "effect"
import { SqlClient } from "effect/sql"
import { Settings } from "../config/settings.ts"
import { RedisClient, type RedisClientShape } from "../coordination/redis-client.ts"
import { CapacityQueues } from "../runtime/capacity-queues.ts"
import { Telemetry } from "./telemetry.ts"

export class MetricsScrape extends Context.Service<MetricsScrape, {
  /** The Prometheus text, or undefined when metrics are off. */
  scrape(): Effect.Effect<string | undefined>
}>()("gateway/observability/MetricsScrape") {
  /** Needs CapacityQueues and SqlClient. */
  static readonly layer = Layer.unwrap(Effect.gen(function*() {
    const { redisUrl } = yield* Settings
    return redisUrl === undefined
      ? Layer.effect(MetricsScrape, make(undefined))
      : Layer.effect(MetricsScrape, Effect.flatMap(RedisClient, make)).pipe(Layer.provide(RedisClient.layerFromSettings))
  }))
}

const make = Effect.fnUntraced(function*(redis: RedisClientShape | undefined) {
  const telemetry = yield* Telemetry
  const queues = yield* CapacityQueues
  const sql = yield* SqlClient.SqlClient

  /** Stored runs per status; a storage failure leaves the series out of this scrape. */
  const storedByStatus = sql<{ status: string; count: number }>`SELECT status, count(*)::int AS count FROM runs GROUP BY status`.pipe(
    Effect.map((rows) => Object.fromEntries(rows.map((row) => [row.status, Number(row.count)]))),
    Effect.timeout("2 seconds"),
    Effect.orElseSucceed(() => undefined)
  )

  const scrape = Effect.fn("MetricsScrape.scrape")(function*() {
    const metrics = telemetry.metrics
    if (metrics === undefined) return undefined
    const [queueViews, runsByStatus] = yield* Effect.all([queues.view(), storedByStatus], { concurrency: 2 })
    return metrics.scrape({ queues: queueViews, runsByStatus, eventLoop: telemetry.eventLoop(), redisRoundTrips: redis?.roundTrips })
  })
  return MetricsScrape.of({ scrape })
})
