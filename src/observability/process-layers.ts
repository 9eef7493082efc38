/**
 * What the `serve` process adds around the gateway's services: the JSON logger at
 * `GATEWAY_LOG_LEVEL`, the OTLP tracer when `OTEL_EXPORTER_OTLP_ENDPOINT` is set, and the metrics
 * listener on `GATEWAY_METRICS_PORT`. Programs that embed the gateway bring their own logger and
 * tracer (these are process-wide choices).
 */
import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import { Console, Effect, Layer, Logger, References } from "effect"
import { HttpServer, HttpServerRequest, HttpServerResponse } from "effect/http"
import { OtlpSerialization, OtlpTracer } from "effect/observability"
import { createServer } from "node:http"
import { Settings } from "../config/settings.ts"
import { metricsResponse } from "../http/metrics-routes.ts"
import { LogLineSink, makeJsonLogger } from "./json-logger.ts"

/** Every `Effect.log*` as one JSON line on stdout (or the `LogLineSink`), at `GATEWAY_LOG_LEVEL` and above. */
export const LoggingLive = Layer.unwrap(Effect.gen(function*() {
  const { logLevel } = yield* Settings
  return Layer.mergeAll(Logger.layer([makeJsonLogger(yield* LogLineSink)]), Layer.succeed(References.MinimumLogLevel)(logLevel))
}))

/**
 * Effect's OTLP/HTTP (JSON) span exporter at `OTEL_EXPORTER_OTLP_ENDPOINT` + `/v1/traces`, with the
 * standard `OTEL_EXPORTER_OTLP_HEADERS` (`k=v,k2=v2`) and `OTEL_BSP_SCHEDULE_DELAY` (ms, default
 * 5000). Unset → no tracer at all, so no span is ever made (Effect's HTTP server skips its server
 * span too when no real tracer is installed).
 */
export const TracingLive = Layer.unwrap(Effect.gen(function*() {
  const { otlpEndpoint, otlpExportDelayMs, otlpHeaders, serviceName } = yield* Settings
  if (otlpEndpoint === undefined) return Layer.empty
  return OtlpTracer.layer({
    url: `${otlpEndpoint.replace(/\/+$/, "")}/v1/traces`,
    resource: { serviceName },
    headers: otlpHeaders,
    ...(otlpExportDelayMs === undefined ? {} : { exportInterval: `${otlpExportDelayMs} millis` })
  }).pipe(Layer.provide(Layer.mergeAll(OtlpSerialization.layerJson, NodeHttpClient.layerUndici)))
}))

/**
 * A scraper needs a connection or two: more open at once are closed as they come, so the
 * unauthenticated port cannot take the descriptors the gateway's own work needs (see the main
 * server's cap in gateway.ts).
 */
const METRICS_MAX_CONNECTIONS = 32

/** The metrics port's server: few connections, and a slow client's request is not waited for long. */
const makeMetricsServer = () => {
  const server = createServer({ headersTimeout: 10_000, requestTimeout: 30_000 })
  server.maxConnections = METRICS_MAX_CONNECTIONS
  return server
}

/** `GET /metrics` without credentials on `HOST:GATEWAY_METRICS_PORT`, when set; anything else is 404. */
export const MetricsListenerLive = Layer.unwrap(Effect.gen(function*() {
  const { metricsPort, host } = yield* Settings
  if (metricsPort === undefined) return Layer.empty
  const app = Effect.gen(function*() {
    const request = yield* HttpServerRequest.HttpServerRequest
    if (request.method !== "GET" || request.url.split("?")[0] !== "/metrics") return HttpServerResponse.text("Not found: this port serves GET /metrics only\n", { status: 404 })
    return yield* metricsResponse.pipe(Effect.catch(() => Effect.succeed(HttpServerResponse.text("Metrics are off\n", { status: 404 }))))
  })
  const announce = Layer.effectDiscard(HttpServer.addressFormattedWith((address) => Console.log(`metrics listening on ${address}/metrics`)))
  return announce.pipe(
    Layer.provideMerge(HttpServer.serve(app)),
    Layer.provide(NodeHttpServer.layer(makeMetricsServer, { port: metricsPort, host }))
  )
}))
