/**
 * `GET /metrics`: every metric in the Prometheus text format (exposition 0.0.4), for the admin
 * token — the figures name keys' models and placements, so they are not public. A scraper that
 * cannot send a bearer token uses `GATEWAY_METRICS_PORT` instead (see gateway.ts). 404 when
 * metrics are off (`GATEWAY_METRICS=off`).
 */
import { Effect } from "effect"
import { HttpServerResponse } from "effect/http"
import { NotFound } from "../errors.ts"
import { MetricsScrape } from "../observability/metrics-scrape.ts"
import type { RouteDef } from "./route.ts"

const PROMETHEUS_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

export const metricsResponse = Effect.gen(function*() {
  const text = yield* (yield* MetricsScrape).scrape()
  if (text === undefined) return yield* new NotFound({ kind: "route", message: "Metrics are off on this gateway (GATEWAY_METRICS=off)" })
  return HttpServerResponse.text(text, { contentType: PROMETHEUS_CONTENT_TYPE, headers: { "cache-control": "no-store" } })
})

export const metricsRoutes: ReadonlyArray<RouteDef<MetricsScrape>> = [
  { method: "GET", path: "/metrics", shape: "flat", auth: "admin", handler: () => metricsResponse }
]
