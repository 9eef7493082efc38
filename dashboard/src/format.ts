/** How numbers, money and times read on the dashboard (US English, UTC months). */

const integer = new Intl.NumberFormat("en-US")
const compact = new Intl.NumberFormat("en-US", { notation: "compact", maximumFractionDigits: 1 })
const dollars = new Intl.NumberFormat("en-US", { style: "currency", currency: "USD" })

/** Small amounts keep their digits: a single call often costs fractions of a cent. */
export const usd = (value: string | number) => {
  const n = typeof value === "number" ? value : Number(value)
  if (!Number.isFinite(n)) return "—"
  if (n === 0) return "$0.00"
  if (Math.abs(n) < 0.01) return `$${n.toFixed(6)}`
  if (Math.abs(n) < 1) return `$${n.toFixed(4)}`
  return dollars.format(n)
}

export const int = (n: number) => integer.format(n)
export const short = (n: number) => compact.format(n)

export const dateTime = (iso: string) =>
  new Date(iso).toLocaleString("en-US", { month: "short", day: "numeric", hour: "2-digit", minute: "2-digit", second: "2-digit", hour12: false })

export const date = (iso: string) => new Date(iso).toLocaleDateString("en-US", { month: "short", day: "numeric", year: "numeric" })

export const monthName = (label: string) => {
  const [y, m] = label.split("-").map(Number)
  return new Date(Date.UTC(y, m - 1, 1)).toLocaleDateString("en-US", { month: "long", year: "numeric", timeZone: "UTC" })
}

export const shiftMonth = (label: string, by: number) => {
  const [y, m] = label.split("-").map(Number)
  const d = new Date(Date.UTC(y, m - 1 + by, 1))
  return `${d.getUTCFullYear()}-${String(d.getUTCMonth() + 1).padStart(2, "0")}`
}

export const duration = (ms: number) => (ms < 1000 ? `${Math.ceil(ms)} ms` : ms < 60_000 ? `${(ms / 1000).toFixed(1)} s` : `${Math.ceil(ms / 60_000)} min`)

export const keyLabel = (key: { name: string | null; hint: string | null; keyId?: string; id?: string }) =>
  key.name ?? key.hint ?? key.keyId ?? key.id ?? "unnamed key"

const sizeUnits = ["B", "KiB", "MiB", "GiB"]
/** Bytes as people read them: 1.5 KiB, 16 MiB. */
export const bytes = (n: number) => {
  let value = n
  let unit = 0
  while (value >= 1024 && unit < sizeUnits.length - 1) {
    value /= 1024
    unit++
  }
  return unit === 0 ? `${n} B` : `${value < 10 ? value.toFixed(1) : Math.round(value)} ${sizeUnits[unit]}`
}
