/**
 * What the dashboard shows about one key's limits: its allowance (used vs remaining, from
 * `Allowance.remaining`, the figure `xsvc-allowance-remaining` carries) and its rate-limit windows
 * (the same token buckets the meter takes from, read without taking anything).
 */
import { Clock, Context, Effect, Layer } from "effect"
import { ConfigFile } from "../config/config-file.ts"
import type { Plan } from "../config/schema.ts"
import { Settings } from "../config/settings.ts"
import { Coordination } from "../coordination/coordination.ts"
import type { KeyRecord } from "../keys/keys-repo.ts"
import { Allowance } from "../metering/allowance.ts"
import { monthOf } from "../metering/month.ts"
import { UsageLedger } from "../metering/usage-ledger.ts"
import { formatUsd, usdToMicros } from "../model/money.ts"

export interface AllowanceView {
  /** `monthly`: the plan's allowance for this UTC month; `credits`: a prepaid balance. */
  readonly kind: "monthly" | "credits"
  /** The month's cap (monthly) or null (credits have no cap, only a balance). */
  readonly limitUsd: string | null
  /** Spent and held by calls in flight. */
  readonly usedUsd: string
  readonly remainingUsd: string
  /** `2026-01` for monthly allowances. */
  readonly month: string | null
}

interface RateWindow {
  readonly limit: number
  readonly remaining: number
  /** Until the window is full again. */
  readonly resetMs: number
}

export interface RateLimitView {
  readonly requestsPerMinute: RateWindow
  readonly tokensPerMinute: RateWindow
  readonly concurrency: { readonly limit: number; readonly inFlight: number }
}

/**
 * The bucket names, scope and period `metering/rate-limits.ts` uses: the read must look at the
 * very buckets the meter takes from (the dashboard's end-to-end test watches them move).
 */
const MINUTE_MS = 60_000
const RPM_BUCKET = "rpm"
const TPM_BUCKET = "tpm"

export class KeyStatus extends Context.Service<KeyStatus, {
  /** Undefined when the allowance store cannot be read (or the key's plan is not configured). */
  allowance(key: KeyRecord): Effect.Effect<AllowanceView | undefined>
  /** Undefined when the store cannot be read, the plan is unknown, or metering is off. */
  rateLimits(key: KeyRecord): Effect.Effect<RateLimitView | undefined>
  plan(key: KeyRecord): Plan | undefined
}>()("gateway/dashboard/KeyStatus") {
  static readonly layer = Layer.effect(KeyStatus, Effect.gen(function*() {
    const config = yield* ConfigFile
    const allowance = yield* Allowance
    const ledger = yield* UsageLedger
    const store = yield* Coordination
    const { metering } = yield* Settings
    const planOf = (key: KeyRecord): Plan | undefined => config.plans[key.plan]

    const allowanceOf = Effect.fnUntraced(function*(key: KeyRecord) {
      const plan = planOf(key)
      if (plan === undefined) return undefined
      const remaining = yield* allowance.remaining(key.id, plan)
      if (plan.prepaid === true) {
        const spent = yield* ledger.spentOnCredits(key.id)
        return { kind: "credits", limitUsd: null, usedUsd: formatUsd(spent), remainingUsd: formatUsd(remaining), month: null } as const
      }
      const cap = usdToMicros(plan.allowanceUsd)
      const month = monthOf(yield* Clock.currentTimeMillis).label
      return {
        kind: "monthly",
        limitUsd: formatUsd(cap),
        usedUsd: formatUsd(Math.max(0, cap - remaining)),
        remainingUsd: formatUsd(remaining),
        month
      } as const
    }, Effect.catch(() => Effect.succeed(undefined)))

    // A gate that can never admit (lease limit 0, cost 0) takes nothing and changes nothing, yet
    // answers every bucket's level and the leases in use: a read of the key's windows.
    const rateLimitsOf = Effect.fnUntraced(function*(key: KeyRecord) {
      const plan = planOf(key)
      if (plan === undefined || !metering) return undefined
      const answer = yield* store.gate({
        scope: key.id,
        buckets: [
          { name: RPM_BUCKET, capacity: plan.rpm, periodMs: MINUTE_MS, cost: 0 },
          { name: TPM_BUCKET, capacity: plan.tpm, periodMs: MINUTE_MS, cost: 0 }
        ],
        lease: { limit: 0, id: "dashboard-read", ttlMs: 1 },
        now: yield* Clock.currentTimeMillis
      })
      const [requests, tokens] = answer.buckets
      return {
        requestsPerMinute: { limit: requests.capacity, remaining: requests.remaining, resetMs: requests.resetMs },
        tokensPerMinute: { limit: tokens.capacity, remaining: tokens.remaining, resetMs: tokens.resetMs },
        concurrency: { limit: plan.concurrency, inFlight: answer.leasesInUse }
      } satisfies RateLimitView
    }, Effect.catch(() => Effect.succeed(undefined)))

    return KeyStatus.of({ allowance: allowanceOf, rateLimits: rateLimitsOf, plan: planOf })
  }))
}
