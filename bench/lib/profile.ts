/** How long and how hard each part runs: the full benchmark and the `--quick` smoke check. */

export interface Profile {
  readonly name: "full" | "quick"
  /** Measured runs per point; the summary reports their median. */
  readonly runs: number
  readonly overhead: {
    readonly warmupRequests: number
    readonly warmupMs: number
    readonly saturateMs: number
    readonly saturateWorkers: number
    /** Sequential requests per run at concurrency 1. */
    readonly c1Requests: number
    readonly c1MaxMs: number
    /** Offered rates (requests/s), each held for `rateMs`; rates far above an arm's capacity are skipped. */
    readonly rates: ReadonlyArray<number>
    readonly rateMs: number
    readonly streamC1: number
    readonly streamRate: number
    readonly streamRateMs: number
  }
  readonly queueing: {
    readonly capacity: number
    readonly serviceMs: number
    readonly offerMs: number
    readonly pollMs: number
  }
  readonly streams: {
    readonly count: number
    readonly rampMs: number
    /** Upstream pacing: first token after ttftMs, then 3-token deltas at tokensPerSecond. */
    readonly ttftMs: number
    readonly tokensPerSecond: number
    readonly maxTokens: number
    readonly settleMs: number
  }
  /** Sustained load: `rate` req/s for `minutes`, one report per minute. */
  readonly soak: {
    readonly rate: number
    readonly minutes: number
  }
}

export const FULL: Profile = {
  name: "full",
  runs: 3,
  overhead: {
    warmupRequests: 1000,
    warmupMs: 10_000,
    saturateMs: 5000,
    saturateWorkers: 64,
    c1Requests: 2000,
    c1MaxMs: 20_000,
    rates: [50, 100, 200, 300, 400, 600, 800, 1000, 1500, 2000, 3000],
    rateMs: 8000,
    streamC1: 100,
    streamRate: 100,
    streamRateMs: 5000
  },
  queueing: { capacity: 8, serviceMs: 100, offerMs: 20_000, pollMs: 100 },
  // A stream lasts ~24 s (1 s to the first token, then 3 tokens every 1.5 s), far longer than the
  // 5 s ramp, so all 1,000 are open together even if admitting them takes the gateway a while.
  streams: { count: 1000, rampMs: 5000, ttftMs: 1000, tokensPerSecond: 2, maxTokens: 45, settleMs: 5000 },
  // Past the 10-minute memory of settled reservations, and long enough to see any drift.
  soak: { rate: 200, minutes: 30 }
}

export const QUICK: Profile = {
  name: "quick",
  runs: 3,
  overhead: {
    warmupRequests: 300,
    warmupMs: 1500,
    saturateMs: 1000,
    saturateWorkers: 64,
    c1Requests: 200,
    c1MaxMs: 2000,
    rates: [50, 200],
    rateMs: 1500,
    streamC1: 10,
    streamRate: 100,
    streamRateMs: 1000
  },
  queueing: { capacity: 8, serviceMs: 100, offerMs: 3000, pollMs: 100 },
  streams: { count: 1000, rampMs: 4000, ttftMs: 500, tokensPerSecond: 3, maxTokens: 24, settleMs: 2000 },
  soak: { rate: 200, minutes: 2 }
}
