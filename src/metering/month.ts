/** Allowance periods: calendar months in UTC. */

export interface Month {
  /** `2026-01`: names the month's budget. */
  readonly label: string
  /** Epoch ms of the first instant of the month, UTC. */
  readonly start: number
  /** Epoch ms of the first instant of the next month (exclusive end). */
  readonly end: number
}

// The request path asks on every call; the answer only changes once a month.
let last: Month | undefined

export const monthOf = (epochMs: number): Month => {
  if (last !== undefined && epochMs >= last.start && epochMs < last.end) return last
  last = computeMonth(epochMs)
  return last
}

const computeMonth = (epochMs: number): Month => {
  const date = new Date(epochMs)
  const year = date.getUTCFullYear()
  const month = date.getUTCMonth()
  return {
    label: `${year}-${String(month + 1).padStart(2, "0")}`,
    start: Date.UTC(year, month, 1),
    end: Date.UTC(year, month + 1, 1)
  }
}

/** Whole seconds until the next month starts (at least 1): the `retry-after` of `allowance_exhausted`. */
export const secondsUntilNextMonth = (epochMs: number): number =>
  Math.max(1, Math.ceil((monthOf(epochMs).end - epochMs) / 1000))
