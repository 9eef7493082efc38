/**
 * The gateway's metrics, as Effect `Metric`s in a registry of their own (one per gateway, so two
 * gateways embedded in one process never mix their series), rendered by
 * `effect/observability`'s `PrometheusMetrics` at `GET /metrics`.
 *
 * The request path records with plain calls: each labelled series is one `Metric` created the first
 * time its label values are seen and kept in a map, and `updateUnsafe` on it is a map lookup and an
 * addition — no Effect, no fiber, no allocation once the series exists. What is state rather than
 * events (queue depth, circuit state, runs by status, the event loop, memory) is read when scraped.
 *
 * Events are not applied when they happen: their arguments wait in one flat array and are applied
 * together every 100 ms, at 1,024 events, or first thing in a scrape (so a scrape sees every event
 * before it). One request's seven-odd updates, applied as it ended, ran on cold caches; applied in a
 * batch they run on warm ones, as the request log's lines do when serialized together
 * (json-logger.ts: a cpu profile at 200 req/s read 45 µs of the logger per request before, 15 after).
 */
import { Context, Metric } from "effect"
import { PrometheusMetrics } from "effect/observability"
import type { CircuitState } from "../../machines/queue.ts"
import type { Usage } from "../model/usage.ts"

/** Latency of whole requests and upstream calls (seconds): 5 ms … 5 min. */
const LATENCY_BOUNDS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300]
/** What the gateway adds (seconds): 50 µs … 1 s; it should sit in the first buckets. */
const OVERHEAD_BOUNDS = [0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1]
/** Waits for a slot (seconds): 0 (a free slot) … the 10-minute maximum. */
const WAIT_BOUNDS = [0.001, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600]

/** Circuit states as the admin API names them. */
const CIRCUIT_STATES: ReadonlyArray<readonly [CircuitState, string]> = [["closed", "closed"], ["open", "open"], ["halfOpen", "half_open"]]

type Labels = Readonly<Record<string, string>>

/**
 * How long events wait to be applied together, and how many force it at once (see above): ~1 µs
 * each, so a drain holds the event loop a millisecond or two at most.
 */
const DRAIN_MS = 100
const MAX_PENDING_EVENTS = 1_024

/** Series of one metric name, one `Metric` per distinct label values. */
const family = <M extends Metric.Metric<number, unknown>>(make: (attributes: Labels) => M) => {
  const series = new Map<string, M>()
  return (key: string, labels: () => Labels): M => {
    let metric = series.get(key)
    if (metric === undefined) {
      metric = make(labels())
      series.set(key, metric)
    }
    return metric
  }
}


/** A placement's queue as the scrape reads it (CapacityQueues.view). */
interface QueueSample {
  readonly placementId: string
  readonly capacity: number
  readonly inUse: number
  readonly waiting: number
  readonly waitingByKey: Readonly<Record<string, number>>
  readonly circuit: CircuitState
}

/** State read at scrape time; each part is optional (a source that failed is left out). */
export interface ScrapeState {
  readonly queues?: ReadonlyArray<QueueSample> | undefined
  /** Stored agent runs per status (every instance's: they share the database). */
  readonly runsByStatus?: Readonly<Record<string, number>> | undefined
  /** Batches per status, for the batches feature to fill in when it lands. */
  readonly batchesByStatus?: Readonly<Record<string, number>> | undefined
  /** Redis round trips by operation since start (RedisClient.roundTrips); absent without Redis. */
  readonly redisRoundTrips?: ReadonlyMap<string, number> | undefined
  /** Event-loop delay since the previous scrape, seconds. */
  readonly eventLoop?: { readonly p50: number; readonly p99: number; readonly max: number } | undefined
}

export const makeGatewayMetrics = () => {
  const registry: Metric.MetricRegistry = new Map()
  const context = Context.make(Metric.MetricRegistry, registry)

  const requests = family((attributes) =>
    Metric.counter("gateway_requests_total", { description: "HTTP requests answered, by surface, requested model (canonical id) and status", attributes })
  )
  const requestDuration = family((attributes) =>
    Metric.histogram("gateway_request_duration_seconds", {
      description: "Whole request, from arrival to the last byte of the response (streams included), by surface",
      boundaries: LATENCY_BOUNDS,
      attributes
    })
  )
  const overhead = family((attributes) =>
    Metric.histogram("gateway_overhead_seconds", {
      description: "Gateway-added latency: the request's time minus its queue waits, upstream calls and retry backoffs, by surface",
      boundaries: OVERHEAD_BOUNDS,
      attributes
    })
  )
  const upstreamDuration = family((attributes) =>
    Metric.histogram("gateway_upstream_duration_seconds", {
      description: "One upstream attempt, from the slot's grant to its end (last byte, failure or cancel), by placement, model and outcome",
      boundaries: LATENCY_BOUNDS,
      attributes
    })
  )
  const ttft = family((attributes) =>
    Metric.histogram("gateway_time_to_first_token_seconds", {
      description: "Streamed requests: from arrival to the first event of the answer (queue wait included), by served model",
      boundaries: LATENCY_BOUNDS,
      attributes
    })
  )
  const queueWait = family((attributes) =>
    Metric.histogram("gateway_queue_wait_seconds", {
      description: "Wait for a capacity slot, by the placement that granted it (0 when a slot was free)",
      boundaries: WAIT_BOUNDS,
      attributes
    })
  )
  const queueTimeouts = family((attributes) =>
    Metric.counter("gateway_queue_timeouts_total", { description: "Waits that reached GATEWAY_QUEUE_MAX_WAIT_MS (503)", attributes })
  )
  const retries = family((attributes) =>
    Metric.counter("gateway_upstream_retries_total", { description: "Upstream attempts made after a failed one, by the placement tried", attributes })
  )
  const failovers = family((attributes) =>
    Metric.counter("gateway_failovers_total", {
      description: "A failed (or broken) attempt handed over to another placement, by placement failed and placement tried next",
      attributes
    })
  )
  const tokens = family((attributes) =>
    Metric.counter("gateway_tokens_total", { description: "Tokens charged, by served model and type (input, output, cached_input, reasoning)", attributes })
  )
  const cost = family((attributes) =>
    Metric.counter("gateway_cost_usd_total", { description: "USD charged at list prices, by served model", attributes })
  )
  const rejections = family((attributes) =>
    Metric.counter("gateway_limit_rejections_total", {
      description: "Requests refused by metering (429), by reason: rate_limit_error, allowance_exhausted, credits_exhausted",
      attributes
    })
  )
  const redisRoundTrips = family((attributes) =>
    Metric.counter("gateway_redis_round_trips_total", {
      description: "Redis round trips (a command, a script or a pipeline) by operation",
      attributes
    })
  )
  const redisCounted = new Map<string, number>()
  const connectionsDropped = Metric.counter("gateway_connections_dropped_total", {
    description: "New client connections closed at once because GATEWAY_MAX_CONNECTIONS were open"
  })
  const gauge = family((attributes) => Metric.gauge(attributes.__name, { description: attributes.__help, attributes: withoutMeta(attributes) }))

  const cpuTotal = Metric.counter("process_cpu_seconds_total", { description: "User and system CPU time of the process, seconds" })
  let cpuCounted = 0
  const add = (metric: Metric.Metric<number, unknown>, value: number) => metric.updateUnsafe(value, context)

  const apply = {
    /** One answered HTTP request (status known, the response finished or its stream ended). */
    request(surface: string, model: string, status: number, durationS: number, overheadS: number | undefined) {
      add(requests(`${surface}\u0000${model}\u0000${status}`, () => ({ surface, model, status: String(status) })), 1)
      add(requestDuration(surface, () => ({ surface })), durationS)
      if (overheadS !== undefined) add(overhead(surface, () => ({ surface })), overheadS)
    },
    queueWait(placementId: string, waitS: number) {
      add(queueWait(placementId, () => ({ placement: placementId })), waitS)
    },
    queueTimeout(placementIds: ReadonlyArray<string>) {
      for (const placementId of placementIds) add(queueTimeouts(placementId, () => ({ placement: placementId })), 1)
    },
    upstream(placementId: string, modelId: string, outcome: string, durationS: number) {
      add(upstreamDuration(`${placementId}\u0000${outcome}`, () => ({ placement: placementId, model: modelId, outcome })), durationS)
    },
    timeToFirstToken(modelId: string, seconds: number) {
      add(ttft(modelId, () => ({ model: modelId })), seconds)
    },
    retry(placementId: string) {
      add(retries(placementId, () => ({ placement: placementId })), 1)
    },
    failover(from: string, to: string) {
      add(failovers(`${from}\u0000${to}`, () => ({ from, to })), 1)
    },
    /** A settled call: what it was charged. */
    charged(modelId: string, usage: Usage, costMicros: number) {
      if (usage.inputTokens > 0) add(tokens(`${modelId}\u0000i`, () => ({ model: modelId, type: "input" })), usage.inputTokens)
      if (usage.outputTokens > 0) add(tokens(`${modelId}\u0000o`, () => ({ model: modelId, type: "output" })), usage.outputTokens)
      if (usage.cachedInputTokens > 0) add(tokens(`${modelId}\u0000c`, () => ({ model: modelId, type: "cached_input" })), usage.cachedInputTokens)
      if (usage.reasoningTokens > 0) add(tokens(`${modelId}\u0000r`, () => ({ model: modelId, type: "reasoning" })), usage.reasoningTokens)
      add(cost(modelId, () => ({ model: modelId })), costMicros / 1_000_000)
    },
    rejected(reason: string) {
      add(rejections(reason, () => ({ reason })), 1)
    },
    /** A new client connection closed at once: the server was at its connection cap. */
    connectionDropped() {
      add(connectionsDropped, 1)
    }
  }

  // Events waiting to be applied: an updater of `apply`, then its arguments.
  let pending: Array<unknown> = []
  let drainScheduled = false
  const drain = () => {
    drainScheduled = false
    const events = pending
    pending = []
    for (let i = 0; i < events.length; i += 2) (events[i] as (...args: Array<unknown>) => void)(...(events[i + 1] as Array<unknown>))
  }
  const later = <A extends Array<unknown>>(update: (...args: A) => void) => (...args: A): void => {
    pending.push(update, args)
    if (pending.length >= 2 * MAX_PENDING_EVENTS) drain()
    else if (!drainScheduled) {
      drainScheduled = true
      setTimeout(drain, DRAIN_MS).unref()
    }
  }

  return {
    request: later(apply.request),
    queueWait: later(apply.queueWait),
    queueTimeout: later(apply.queueTimeout),
    upstream: later(apply.upstream),
    timeToFirstToken: later(apply.timeToFirstToken),
    retry: later(apply.retry),
    failover: later(apply.failover),
    charged: later(apply.charged),
    rejected: later(apply.rejected),
    connectionDropped: later(apply.connectionDropped),
    /** The Prometheus text of every series, after applying the waiting events and reading the state-like ones. */
    scrape(state: ScrapeState): string {
      drain()
      const set = (name: string, help: string, labels: Labels, value: number) =>
        gauge(`${name}\u0000${Object.values(labels).join("\u0000")}`, () => ({ ...labels, __name: name, __help: help })).updateUnsafe(value, context)
      for (const q of state.queues ?? []) {
        const placement = { placement: q.placementId }
        set("gateway_queue_capacity", "Slots of the placement (its configured capacity)", placement, q.capacity)
        set("gateway_queue_in_flight", "Slots in use (calls running on the placement)", placement, q.inUse)
        set("gateway_queue_depth", "Requests waiting for a slot on the placement", placement, q.waiting)
        set("gateway_queue_waiting_keys", "Keys with at least one request waiting on the placement", placement, Object.keys(q.waitingByKey).length)
        for (const [circuit, state] of CIRCUIT_STATES) {
          set("gateway_circuit_state", "1 for the placement's current circuit state, 0 for the others", { ...placement, state }, q.circuit === circuit ? 1 : 0)
        }
      }
      for (const [status, count] of Object.entries(state.runsByStatus ?? {})) {
        set("gateway_runs", "Stored agent runs by status (all instances: from the database)", { status }, count)
      }
      for (const [status, count] of Object.entries(state.batchesByStatus ?? {})) {
        set("gateway_batches", "Stored batches by status (all instances: from the database)", { status }, count)
      }
      for (const [operation, count] of state.redisRoundTrips ?? []) {
        // The client counts with a plain map (no Metric on its path); the scrape adds what is new.
        const counted = redisCounted.get(operation) ?? 0
        if (count > counted) add(redisRoundTrips(operation, () => ({ operation })), count - counted)
        redisCounted.set(operation, count)
      }
      if (state.eventLoop !== undefined) {
        set("gateway_event_loop_delay_p50_seconds", "Median event-loop delay since the previous scrape", {}, state.eventLoop.p50)
        set("gateway_event_loop_delay_p99_seconds", "99th percentile event-loop delay since the previous scrape", {}, state.eventLoop.p99)
        set("gateway_event_loop_delay_max_seconds", "Largest event-loop delay since the previous scrape", {}, state.eventLoop.max)
      }
      const memory = process.memoryUsage()
      set("process_resident_memory_bytes", "Resident memory size in bytes", {}, memory.rss)
      set("nodejs_heap_used_bytes", "V8 heap in use, bytes", {}, memory.heapUsed)
      const cpu = process.cpuUsage()
      const cpuSeconds = (cpu.user + cpu.system) / 1e6
      add(cpuTotal, cpuSeconds - cpuCounted)
      cpuCounted = cpuSeconds
      return PrometheusMetrics.formatUnsafe(context)
    }
  }
}

export type GatewayMetrics = ReturnType<typeof makeGatewayMetrics>

/** `__name` and `__help` ride along in the label map only to build the gauge. */
const withoutMeta = (labels: Labels): Labels => {
  const { __name: _name, __help: _help, ...rest } = labels
  return rest
}
