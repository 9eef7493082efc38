/** Small statistics helpers: exact percentiles over recorded samples, medians across runs, Jain's index. */

/** The q-quantile (0–1) of unsorted numbers by nearest rank on a sorted copy; NaN when empty. */
export const percentile = (values: ReadonlyArray<number>, q: number): number => {
  if (values.length === 0) return Number.NaN
  const sorted = Float64Array.from(values).sort()
  return sortedPercentile(sorted, q)
}

export const sortedPercentile = (sorted: ArrayLike<number>, q: number): number => {
  if (sorted.length === 0) return Number.NaN
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))
  return sorted[rank]!
}

export interface Distribution {
  readonly count: number
  readonly mean: number
  readonly p50: number
  readonly p90: number
  readonly p99: number
  readonly p999: number
  readonly max: number
}

export const distribution = (values: ReadonlyArray<number>): Distribution => {
  const sorted = Float64Array.from(values).sort()
  let sum = 0
  for (const v of sorted) sum += v
  return {
    count: sorted.length,
    mean: sorted.length === 0 ? Number.NaN : sum / sorted.length,
    p50: sortedPercentile(sorted, 0.5),
    p90: sortedPercentile(sorted, 0.9),
    p99: sortedPercentile(sorted, 0.99),
    p999: sortedPercentile(sorted, 0.999),
    max: sorted.length === 0 ? Number.NaN : sorted[sorted.length - 1]!
  }
}

export const median = (values: ReadonlyArray<number>): number => {
  const s = values.filter((v) => Number.isFinite(v)).sort((a, b) => a - b)
  if (s.length === 0) return Number.NaN
  const mid = Math.floor(s.length / 2)
  return s.length % 2 === 1 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2
}

/** Field-wise median of several distributions (the median p99 of three runs, etc.). */
export const medianDistribution = (runs: ReadonlyArray<Distribution>): Distribution => ({
  count: median(runs.map((r) => r.count)),
  mean: median(runs.map((r) => r.mean)),
  p50: median(runs.map((r) => r.p50)),
  p90: median(runs.map((r) => r.p90)),
  p99: median(runs.map((r) => r.p99)),
  p999: median(runs.map((r) => r.p999)),
  max: median(runs.map((r) => r.max))
})

/**
 * Jain's fairness index of allocations x: (Σx)² / (n·Σx²); 1 when all equal, 1/n when one takes all.
 * Pass allocation ÷ entitlement to judge against unequal fair shares.
 */
export const jain = (xs: ReadonlyArray<number>): number => {
  const sum = xs.reduce((a, b) => a + b, 0)
  const squares = xs.reduce((a, b) => a + b * b, 0)
  return squares === 0 ? Number.NaN : (sum * sum) / (xs.length * squares)
}

/**
 * Max-min fair shares of a capacity among demands (water filling): a key asking for less than an
 * equal split gets what it asks; the rest is split equally among the others.
 */
export const maxMinFair = (demands: ReadonlyArray<number>, capacity: number): number[] => {
  const shares = demands.map(() => 0)
  let remaining = capacity
  let open = demands.map((_, i) => i)
  while (open.length > 0 && remaining > 1e-12) {
    const split = remaining / open.length
    const satisfied = open.filter((i) => demands[i]! - shares[i]! <= split)
    if (satisfied.length === 0) {
      for (const i of open) shares[i]! += split
      remaining = 0
      break
    }
    for (const i of satisfied) {
      remaining -= demands[i]! - shares[i]!
      shares[i] = demands[i]!
    }
    open = open.filter((i) => !satisfied.includes(i))
  }
  return shares
}

export const round = (value: number, digits = 0): number => {
  if (!Number.isFinite(value)) return value
  const f = 10 ** digits
  return Math.round(value * f) / f
}
