/**
 * The load generator: open-loop, constant-rate, on undici.
 *
 * Open loop means the arrival schedule is fixed before the run — request i is due at
 * t0 + i / rate — and never waits for earlier answers, so a slow server faces the same arrivals as
 * a fast one. Latency is taken from the request's *scheduled* time, not from when it was actually
 * written, so time a request spent waiting behind a stalled client or a full connection pool
 * counts (no coordinated omission). autocannon's rate mode throttles each connection instead
 * (closed loop: a late answer delays the next request, and the delay is never measured), and wrk2
 * — the usual open-loop tool — is not packaged in Debian; hence this scheduler on undici's Pool
 * (the HTTP client the gateway itself uses upstream), with the generator's own send lag reported
 * so an overloaded generator shows.
 */
import { Pool } from "undici"
import { distribution, type Distribution } from "./stats.ts"

export interface RequestSpec {
  readonly pool: Pool
  readonly path: string
  readonly headers: Record<string, string>
  readonly body: string
  /** A label the result is grouped by (the key in the queueing test). */
  readonly label?: string
}

export interface Sample {
  readonly label: string
  /** Scheduled start, ms on the performance clock. */
  readonly scheduled: number
  /** When the request was handed to the client (≥ scheduled). */
  readonly sent: number
  /** When the last byte arrived. */
  readonly end: number
  readonly status: number
  /** Streams: when the first content delta arrived. */
  readonly firstToken?: number
  /** Streams: gaps between consecutive content deltas, ms. */
  readonly gaps?: ReadonlyArray<number>
  readonly error?: string
}

/** A keep-alive pool; a request that gets no headers (or no body bytes) for `timeoutMs` fails. */
export const makePool = (origin: string, connections: number, timeoutMs = 120_000) =>
  new Pool(origin, {
    connections,
    pipelining: 1,
    keepAliveTimeout: 60_000,
    keepAliveMaxTimeout: 600_000,
    headersTimeout: timeoutMs,
    bodyTimeout: timeoutMs
  })

const now = () => performance.now()

/** A content delta in an SSE event (Chat Completions `delta.content` that is not empty). */
const CONTENT = /"content":"(?!")/

export interface Tracker {
  inFlight: number
  /** Streams whose headers arrived and whose body has not ended. */
  openStreams: number
}

/** Sends one request and records its timing; streams are read event by event. */
export const send = async (spec: RequestSpec, scheduled: number, stream: boolean, tracker?: Tracker): Promise<Sample> => {
  const sent = now()
  const label = spec.label ?? ""
  if (tracker !== undefined) tracker.inFlight++
  try {
    const res = await spec.pool.request({ path: spec.path, method: "POST", headers: spec.headers, body: spec.body })
    if (!stream || res.statusCode !== 200) {
      await res.body.dump({ limit: Number.MAX_SAFE_INTEGER })
      return { label, scheduled, sent, end: now(), status: res.statusCode }
    }
    if (tracker !== undefined) tracker.openStreams++
    let firstToken: number | undefined
    let last = 0
    const gaps: number[] = []
    let buffer = ""
    try {
      for await (const chunk of res.body) {
        const at = now()
        buffer += chunk.toString()
        let cut = buffer.indexOf("\n\n")
        while (cut !== -1) {
          const event = buffer.slice(0, cut)
          buffer = buffer.slice(cut + 2)
          cut = buffer.indexOf("\n\n")
          if (!event.includes("data:") || !CONTENT.test(event)) continue
          if (firstToken === undefined) firstToken = at
          else gaps.push(at - last)
          last = at
        }
      }
    } finally {
      if (tracker !== undefined) tracker.openStreams--
    }
    return { label, scheduled, sent, end: now(), status: res.statusCode, ...(firstToken === undefined ? {} : { firstToken }), gaps }
  } catch (error) {
    return { label, scheduled, sent, end: now(), status: 0, error: String((error as Error)?.message ?? error) }
  } finally {
    if (tracker !== undefined) tracker.inFlight--
  }
}

export interface OpenLoopOptions {
  readonly rate: number
  readonly durationMs: number
  readonly stream?: boolean
  /** The i-th request of the schedule. */
  readonly pick: (i: number) => RequestSpec
  readonly tracker?: Tracker
}

export interface OpenLoopRun {
  readonly t0: number
  readonly scheduledCount: number
  readonly samples: ReadonlyArray<Sample>
}

/**
 * Sends `rate × duration` requests on a fixed schedule and waits for all of them. The timer wakes
 * at least every millisecond (no busy-wait: the generator's core also runs the upstream) and sends
 * everything that is due.
 */
export const openLoop = async (options: OpenLoopOptions): Promise<OpenLoopRun> => {
  const count = Math.max(1, Math.round((options.rate * options.durationMs) / 1000))
  const interval = 1000 / options.rate
  const t0 = now() + 5
  const pending: Promise<Sample>[] = []
  let next = 0
  await new Promise<void>((resolve) => {
    const tick = () => {
      const t = now()
      while (next < count && t0 + next * interval <= t) {
        pending.push(send(options.pick(next), t0 + next * interval, options.stream ?? false, options.tracker))
        next++
      }
      if (next >= count) return resolve()
      const wait = t0 + next * interval - now()
      // Timers have 1 ms granularity: sends may be up to ~1 ms late, which counts (send lag).
      setTimeout(tick, Math.max(0, Math.floor(wait - 0.5)))
    }
    tick()
  })
  return { t0, scheduledCount: count, samples: await Promise.all(pending) }
}

/**
 * Concurrency 1: each request starts when the previous one ended (latency from its own start).
 * Stops after `count` requests or `maxMs`, whichever comes first.
 */
export const sequential = async (count: number, pick: (i: number) => RequestSpec, stream = false, maxMs = Number.POSITIVE_INFINITY): Promise<Sample[]> => {
  const samples: Sample[] = []
  const until = now() + maxMs
  for (let i = 0; i < count && now() < until; i++) {
    const t = now()
    samples.push(await send(pick(i), t, stream))
  }
  return samples
}

/** Closed loop with `workers` concurrent requests for a while: the most a target answers per second. */
export const saturate = async (workers: number, durationMs: number, pick: (i: number) => RequestSpec) => {
  const until = now() + durationMs
  let i = 0
  let ok = 0
  let failed = 0
  const start = now()
  await Promise.all(Array.from({ length: workers }, async () => {
    while (now() < until) {
      const s = await send(pick(i++), now(), false)
      if (s.status === 200) ok++
      else failed++
    }
  }))
  const elapsed = (now() - start) / 1000
  return { workers, seconds: elapsed, ok, failed, rps: ok / elapsed }
}

export interface LatencySummary {
  readonly requests: number
  readonly ok: number
  readonly statuses: Record<string, number>
  /** Answers per second over the schedule (completed 200s ÷ time from t0 to the last answer). */
  readonly achievedRps: number
  /** Latency from the scheduled start, µs. */
  readonly latencyUs: Distribution
  /** How late the generator handed requests to the client, µs (its own health). */
  readonly sendLagUs: Distribution
  readonly firstTokenUs?: Distribution
  readonly gapUs?: Distribution
}

export const statuses = (samples: ReadonlyArray<Sample>): Record<string, number> => {
  const counts: Record<string, number> = {}
  for (const s of samples) {
    const key = s.status === 0 ? "error" : String(s.status)
    counts[key] = (counts[key] ?? 0) + 1
  }
  return counts
}

/**
 * The earliest scheduled start and the latest end of a run's samples. A loop, not `Math.min(...)`:
 * spreading a long run's samples (16 minutes at 200 req/s: 192,000) as arguments overflows the stack.
 */
export const sampleSpan = (samples: ReadonlyArray<Sample>): { readonly firstScheduled: number; readonly lastEnd: number } => {
  let firstScheduled = Number.POSITIVE_INFINITY
  let lastEnd = Number.NEGATIVE_INFINITY
  for (const s of samples) {
    if (s.scheduled < firstScheduled) firstScheduled = s.scheduled
    if (s.end > lastEnd) lastEnd = s.end
  }
  return { firstScheduled, lastEnd }
}

export const summarize = (samples: ReadonlyArray<Sample>, t0?: number): LatencySummary => {
  const ok = samples.filter((s) => s.status === 200)
  const span = sampleSpan(samples)
  const start = t0 ?? span.firstScheduled
  const lastEnd = span.lastEnd
  const streamed = ok.filter((s) => s.firstToken !== undefined)
  return {
    requests: samples.length,
    ok: ok.length,
    statuses: statuses(samples),
    achievedRps: ok.length / ((lastEnd - start) / 1000),
    latencyUs: distribution(ok.map((s) => (s.end - s.scheduled) * 1000)),
    sendLagUs: distribution(samples.map((s) => (s.sent - s.scheduled) * 1000)),
    ...(streamed.length === 0 ? {} : {
      firstTokenUs: distribution(streamed.map((s) => (s.firstToken! - s.scheduled) * 1000)),
      gapUs: distribution(streamed.flatMap((s) => (s.gaps ?? []).map((g) => g * 1000)))
    })
  }
}
