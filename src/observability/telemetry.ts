/**
 * Telemetry: the metrics registry, whether traces are exported, and how a finished request becomes
 * its metrics and its log line. A `Context.Reference` whose default records nothing, so the runtime's
 * services read it without requiring it (tests and embedders that never provide it pay nothing);
 * the gateway provides the real one (`Telemetry.layer`, from Settings).
 *
 * Cost on the request path, by design: metrics are plain calls on pre-made series; the request's
 * facts are assignments on its `RequestRecord`; the log line is one `Effect.log` of a prebuilt
 * object, skipped when its level is filtered out. Nothing here creates a span unless tracing is on.
 */
import { Context, Effect, Layer, type LogLevel } from "effect"
import { monitorEventLoopDelay } from "node:perf_hooks"
import { Settings } from "../config/settings.ts"
import { shown } from "../errors.ts"
import { microsToUsd } from "../model/money.ts"
import { type GatewayMetrics, makeGatewayMetrics } from "./gateway-metrics.ts"
import { LogFields } from "./json-logger.ts"
import type { RequestRecord } from "./request-record.ts"
import { finishRequestSpan } from "./tracing.ts"

export interface TelemetryShape {
  /** Undefined when metrics are off (`GATEWAY_METRICS=off`). */
  readonly metrics: GatewayMetrics | undefined
  /** Spans are made only when true (`OTEL_EXPORTER_OTLP_ENDPOINT` set). */
  readonly tracing: boolean
  /** Records a finished request's metrics and logs its line. */
  finish(record: RequestRecord): Effect.Effect<void>
  /** Event-loop delay since the previous call (seconds), for the scrape. */
  eventLoop(): { readonly p50: number; readonly p99: number; readonly max: number } | undefined
}

const ORDER: Record<LogLevel.LogLevel, number> = {
  All: Number.MIN_SAFE_INTEGER, Trace: 0, Debug: 10_000, Info: 20_000, Warn: 30_000, Error: 40_000, Fatal: 50_000, None: Number.MAX_SAFE_INTEGER
}

/** Probes, scrapes and the dashboard's assets are logged at debug: they would drown the requests. */
const isQuiet = (record: RequestRecord) => record.surface === "health" || record.surface === "metrics" || record.surface === "dashboard"

const LOOP_RESOLUTION_MS = 20

const ms = (value: number) => Math.round(value * 1000) / 1000

/**
 * The request log line's fields (snake_case, as log pipelines and LiteLLM's payload name them).
 * Client-controlled text (a model name, a path, an error message that quotes the request) is cut
 * as error messages quote it (`shown`): a log line stays small whatever a request carries (stdout
 * to a pipe is written synchronously).
 */
const requestLogFields = (record: RequestRecord, durationMs: number): Record<string, unknown> => {
  const fields: Record<string, unknown> = {
    request_id: record.requestId,
    method: record.method,
    path: shown(record.path, 2_000),
    surface: record.surface,
    status: record.status,
    duration_ms: ms(durationMs)
  }
  if (record.keyId !== undefined) fields.key_id = record.keyId
  if (record.modelAsked !== undefined) fields.model_asked = shown(record.modelAsked, 200)
  if (record.model !== undefined) fields.model = record.model
  if (record.servedModel !== undefined) fields.served_model = record.servedModel
  if (record.placement !== undefined) fields.placement = record.placement
  if (record.stream !== undefined) fields.stream = record.stream
  if (record.attempts > 0) {
    fields.queue_wait_ms = ms(record.queueWaitMs)
    fields.upstream_ms = ms(record.upstreamMs)
    fields.attempts = record.attempts
    if (record.retries > 0) fields.retries = record.retries
    if (record.failovers > 0) fields.failovers = record.failovers
    if (record.backoffMs > 0) fields.backoff_ms = ms(record.backoffMs)
  }
  if (record.ttftMs !== undefined) fields.ttft_ms = ms(record.ttftMs)
  if (record.usage !== undefined) {
    fields.input_tokens = record.usage.inputTokens
    fields.output_tokens = record.usage.outputTokens
    if (record.usage.cachedInputTokens > 0) fields.cached_input_tokens = record.usage.cachedInputTokens
    if (record.usage.reasoningTokens > 0) fields.reasoning_tokens = record.usage.reasoningTokens
  }
  if (record.costMicros !== undefined) fields.cost_usd = microsToUsd(record.costMicros)
  if (record.error !== undefined) {
    fields.error_type = record.error.type
    fields.error_message = shown(record.error.message, 2_000)
  }
  if (record.cause !== undefined) fields.cause = shown(record.cause, 16_000)
  return fields
}

export const makeTelemetry = (options: {
  readonly metrics: boolean
  readonly tracing: boolean
  readonly logLevel: LogLevel.LogLevel
}): TelemetryShape => {
  const metrics = options.metrics ? makeGatewayMetrics() : undefined
  const minimum = ORDER[options.logLevel]
  // Samples every 20 ms; each sample is the timer's interval, so the delay is what exceeds 20 ms.
  const histogram = options.metrics ? monitorEventLoopDelay({ resolution: LOOP_RESOLUTION_MS }) : undefined
  histogram?.enable()
  return {
    metrics,
    tracing: options.tracing,
    finish: (record) => {
      const durationMs = performance.now() - record.startedAt
      if (metrics !== undefined) {
        const overheadMs = record.attempts > 0 ? Math.max(0, durationMs - record.queueWaitMs - record.upstreamMs - record.backoffMs) : undefined
        metrics.request(record.surface, record.model ?? "", record.status, durationMs / 1000, overheadMs === undefined ? undefined : overheadMs / 1000)
      }
      const level: LogLevel.LogLevel = record.status >= 500 ? "Error" : isQuiet(record) ? "Debug" : "Info"
      const span = record.span
      if (span !== undefined) {
        record.span = undefined
        const log = ORDER[level] < minimum ? Effect.void : Effect.logWithLevel(level)(new LogFields("request", { ...requestLogFields(record, durationMs), trace_id: span.traceId }))
        return Effect.clockWith((clock) => {
          finishRequestSpan(record, span, clock.currentTimeNanosUnsafe())
          return log
        })
      }
      if (ORDER[level] < minimum) return Effect.void
      return Effect.logWithLevel(level)(new LogFields("request", requestLogFields(record, durationMs)))
    },
    eventLoop: () => {
      if (histogram === undefined || histogram.count === 0) return undefined
      const beyond = (ns: number) => Math.max(0, ns / 1e9 - LOOP_RESOLUTION_MS / 1000)
      const sample = { p50: beyond(histogram.percentile(50)), p99: beyond(histogram.percentile(99)), max: beyond(histogram.max) }
      histogram.reset()
      return sample
    }
  }
}

const disabled: TelemetryShape = {
  metrics: undefined,
  tracing: false,
  finish: () => Effect.void,
  eventLoop: () => undefined
}

export const Telemetry = Context.Reference<TelemetryShape>("gateway/observability/Telemetry", { defaultValue: () => disabled })

/** From Settings: `GATEWAY_METRICS`, `GATEWAY_LOG_LEVEL`, `OTEL_EXPORTER_OTLP_ENDPOINT`. */
export const TelemetryLive = Layer.effect(Telemetry, Effect.gen(function*() {
  const settings = yield* Settings
  return makeTelemetry({ metrics: settings.metrics, tracing: settings.otlpEndpoint !== undefined, logLevel: settings.logLevel })
}))
