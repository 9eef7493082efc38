/**
 * Per-key rate limits from the plan: requests per minute, tokens per minute (input estimate +
 * output ceiling) and requests in flight, checked and taken in one atomic step.
 *
 * Model: each per-minute limit is a token bucket of `limit` that refills continuously at
 * limit/60 per second (O(1) state, an exact retry-after, and the same meaning as OpenAI's
 * `x-ratelimit-reset-*`: the time until the bucket is full again). A burst of `limit` passes at
 * once; sustained traffic is held to `limit` per minute. A request larger than the whole tpm
 * passes only on a full bucket, so its `rate_limit_error` is still worth retrying.
 *
 * Concurrency uses leases renewed while the call runs; a dead instance's leases lapse after
 * `leaseTtlMs`. The store being unreachable FAILS OPEN: the call is admitted without headers.
 */
import { Clock, Context, Effect, Layer } from "effect"
import type { Plan } from "../config/schema.ts"
import { Coordination } from "../coordination/coordination.ts"
import type { BucketState, GateRequest, GateResult } from "../coordination/types.ts"
import { LimitExceeded } from "../errors.ts"
import { newId } from "../util/ids.ts"

interface Window {
  readonly limit: number
  readonly remaining: number
  /** Until the window is back to its full limit. */
  readonly resetMs: number
}

export interface RateState {
  readonly requests: Window
  readonly tokens: Window
}

export interface Admission {
  /** Undefined when the store could not be asked (failed open): send no x-ratelimit headers. */
  readonly state: RateState | undefined
  /** Frees the concurrency slot; idempotent, never fails, never waits for the store. */
  readonly release: Effect.Effect<void>
  /** The same, at once, where the store is in process (`admitNow`). */
  readonly releaseNow?: (() => void) | undefined
}

export interface RateLimitOptions {
  readonly leaseTtlMs?: number
  readonly renewEveryMs?: number
  /** Leases older than this stop being renewed, so a leaked one cannot hold a slot forever. */
  readonly maxLeaseMs?: number
}

const MINUTE_MS = 60_000

/**
 * A duration the way OpenAI writes `x-ratelimit-reset-*` (Go's time.Duration): "20ms", "1s",
 * "17.2s", "6m0s", "1h0m0s".
 */
export const formatResetDuration = (ms: number): string => {
  const total = Math.max(0, Math.ceil(ms))
  if (total === 0) return "0s"
  if (total < 1_000) return `${total}ms`
  const hours = Math.floor(total / 3_600_000)
  const minutes = Math.floor((total % 3_600_000) / 60_000)
  const seconds = `${Number(((total % 60_000) / 1_000).toFixed(3))}s`
  if (hours > 0) return `${hours}h${minutes}m${seconds}`
  if (minutes > 0) return `${minutes}m${seconds}`
  return seconds
}

const windowOf = (bucket: BucketState): Window => ({ limit: bucket.capacity, remaining: bucket.remaining, resetMs: bucket.resetMs })

export interface AdmitRequest {
  readonly keyId: string
  readonly plan: Plan
  readonly tokens: number
}

export class RateLimits extends Context.Service<RateLimits, {
  admit(request: AdmitRequest): Effect.Effect<Admission, LimitExceeded>
  /**
   * `admit` answered synchronously, when the coordination store is in process (the hot path's
   * shortcut); absent on Redis.
   */
  readonly admitNow?: ((request: AdmitRequest, now: number) => Admission | LimitExceeded) | undefined
  /**
   * The store command `admit` sends, and how its answer becomes the admission: for a caller that
   * sends it together with other commands (one round trip to a remote store).
   */
  prepare(request: AdmitRequest, now: number): {
    readonly gate: GateRequest
    decide(answer: GateResult): Admission | LimitExceeded
    /** For a gate whose answer never came (it may still have run): lets its concurrency lease go. Never fails. */
    readonly abandon: Effect.Effect<void>
  }
  headers(state: RateState | undefined): Record<string, string>
}>()("gateway/metering/RateLimits") {
  static readonly layerWith = (options: RateLimitOptions) => Layer.effect(RateLimits, make(options))
  static readonly layer = RateLimits.layerWith({})
  /** Short leases, for tests that watch them lapse. */
  static readonly layerTest = RateLimits.layerWith({ leaseTtlMs: 1_000, renewEveryMs: 300 })
}

const headers = (state: RateState | undefined): Record<string, string> =>
  state === undefined ? {} : {
    "x-ratelimit-limit-requests": String(state.requests.limit),
    "x-ratelimit-remaining-requests": String(state.requests.remaining),
    "x-ratelimit-reset-requests": formatResetDuration(state.requests.resetMs),
    "x-ratelimit-limit-tokens": String(state.tokens.limit),
    "x-ratelimit-remaining-tokens": String(state.tokens.remaining),
    "x-ratelimit-reset-tokens": formatResetDuration(state.tokens.resetMs)
  }

function make(options: RateLimitOptions) {
  return Effect.gen(function*() {
    const store = yield* Coordination
    const leaseTtlMs = options.leaseTtlMs ?? 60_000
    const renewEveryMs = options.renewEveryMs ?? Math.max(100, Math.floor(leaseTtlMs / 4))
    const maxLeaseMs = options.maxLeaseMs ?? 2 * 60 * 60_000
    const live = new Map<string, { scope: string; id: string; since: number }>()
    let lastOutageLog = 0

    const refuse = (plan: Plan, buckets: ReadonlyArray<BucketState>, leaseRefused: boolean) => {
      const waitMs = Math.max(0, ...buckets.map((b) => b.retryAfterMs))
      const which = [
        buckets[0]?.retryAfterMs > 0 ? `requests per minute (limit ${plan.rpm})` : undefined,
        buckets[1]?.retryAfterMs > 0 ? `tokens per minute (limit ${plan.tpm})` : undefined,
        leaseRefused ? `concurrent requests (limit ${plan.concurrency})` : undefined
      ].filter((s) => s !== undefined).join(" and ")
      // A concurrency refusal has no known end: one second is the shortest honest wait.
      const retryAfterSeconds = Math.max(1, Math.ceil(waitMs / 1_000))
      const state = buckets.length >= 2 ? { requests: windowOf(buckets[0]), tokens: windowOf(buckets[1]) } : undefined
      return new LimitExceeded({
        kind: "rate_limit_error",
        message: `Rate limit reached for ${which}; retry in ${retryAfterSeconds}s`,
        retryAfterSeconds,
        headers: headers(state)
      })
    }

    const gateOf = (request: AdmitRequest, now: number) => ({
      scope: request.keyId,
      buckets: [
        { name: "rpm", capacity: request.plan.rpm, periodMs: MINUTE_MS, cost: 1 },
        { name: "tpm", capacity: request.plan.tpm, periodMs: MINUTE_MS, cost: Math.max(0, Math.ceil(request.tokens)) }
      ],
      lease: { limit: request.plan.concurrency, id: newId("lease"), ttlMs: leaseTtlMs },
      now
    })

    /** The store's answer as an admission (its lease kept renewed) or the refusal. */
    const decide = (request: AdmitRequest, gate: ReturnType<typeof gateOf>, answer: GateResult): Admission | LimitExceeded => {
      if (!answer.admitted) return refuse(request.plan, answer.buckets, answer.leaseRefused)
      const held = { scope: request.keyId, id: gate.lease.id, since: gate.now }
      live.set(held.id, held)
      // Off the caller's path: the store does not wait for the release (a lost one lapses by its ttl).
      const release = Effect.suspend(() => (live.delete(held.id) ? store.releaseLease(held) : Effect.void))
      const local = store.local
      return {
        state: { requests: windowOf(answer.buckets[0]), tokens: windowOf(answer.buckets[1]) },
        release,
        releaseNow: local === undefined ? undefined : () => {
          if (live.delete(held.id)) local.releaseLease(held)
        }
      }
    }

    /**
     * A gate that failed may still have run (its answer timed out): its lease is released, so a
     * retry's lease is not counted beside it until it lapses. (What it added to the rpm and tpm
     * buckets stays: they drain by themselves, and counting a request twice errs on the safe side.)
     */
    const abandon = (gate: GateRequest) =>
      gate.lease === undefined ? Effect.void : store.releaseLease({ scope: gate.scope, id: gate.lease.id })

    const admit = Effect.fnUntraced(function*(request: AdmitRequest) {
      const now = yield* Clock.currentTimeMillis
      const gate = gateOf(request, now)
      const answer = yield* store.gate(gate).pipe(Effect.catchTag("CoordinationError", (error) =>
        // Admitted without limits; the gate may still have run: its lease must not stay counted.
        Effect.andThen(abandon(gate), () => {
          if (now - lastOutageLog > 10_000) {
            lastOutageLog = now
            return Effect.as(Effect.logWarning(`rate limits: store unavailable, admitting without limits (${error.message})`), undefined)
          }
          return Effect.succeed(undefined)
        })
      ))
      if (answer === undefined) return { state: undefined, release: Effect.void }
      const decided = decide(request, gate, answer)
      return decided instanceof LimitExceeded ? yield* decided : decided
    })

    const local = store.local
    const admitNow = local === undefined ? undefined : (request: AdmitRequest, now: number) => {
      const gate = gateOf(request, now)
      return decide(request, gate, local.gate(gate))
    }

    yield* Effect.forkScoped(Effect.forever(Effect.gen(function*() {
      yield* Effect.sleep(renewEveryMs)
      const now = yield* Clock.currentTimeMillis
      const leases = []
      for (const lease of live.values()) {
        if (now - lease.since > maxLeaseMs) live.delete(lease.id)
        else leases.push(lease)
      }
      yield* store.renewLeases(leases, leaseTtlMs, now).pipe(Effect.ignore)
    })))

    const prepare = (request: AdmitRequest, now: number) => {
      const gate = gateOf(request, now)
      return { gate, decide: (answer: GateResult) => decide(request, gate, answer), abandon: abandon(gate) }
    }

    return RateLimits.of({ admit, admitNow, prepare, headers })
  })
}
