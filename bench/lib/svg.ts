/** A small SVG chart writer (grouped bars, lines) with no dependencies. */

const COLORS = ["#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#9c755f"]
const W = 760
const H = 420
const M = { top: 48, right: 24, bottom: 72, left: 78 }

const esc = (s: string) => s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;")

const fmt = (v: number) => {
  if (v === 0) return "0"
  const a = Math.abs(v)
  if (a >= 1e6) return `${+(v / 1e6).toPrecision(3)}M`
  if (a >= 1e3) return `${+(v / 1e3).toPrecision(3)}k`
  if (a >= 1) return String(+v.toPrecision(3))
  return String(+v.toPrecision(2))
}

/** Round tick values covering [0, max] (linear) or decades covering [min, max] (log). */
const ticks = (min: number, max: number, log: boolean): number[] => {
  if (log) {
    const out: number[] = []
    for (let e = Math.floor(Math.log10(min)); e <= Math.ceil(Math.log10(max)); e++) out.push(10 ** e)
    return out
  }
  const raw = max / 5
  const mag = 10 ** Math.floor(Math.log10(raw || 1))
  const step = [1, 2, 2.5, 5, 10].map((m) => m * mag).find((s) => s >= raw) ?? mag * 10
  const out: number[] = []
  for (let v = 0; v <= max + step * 0.999; v += step) out.push(v)
  return out
}

interface Frame {
  readonly y: (v: number) => number
  readonly parts: string[]
  readonly plotW: number
  readonly plotH: number
}

const frame = (title: string, yLabel: string, values: ReadonlyArray<number>, log: boolean): Frame => {
  const finite = values.filter((v) => Number.isFinite(v) && (!log || v > 0))
  const maxV = finite.length === 0 ? 1 : Math.max(...finite)
  const minV = finite.length === 0 ? 1 : Math.min(...finite)
  const ts = ticks(log ? minV : 0, maxV * (log ? 1 : 1.05), log)
  const lo = log ? ts[0]! : 0
  const hi = ts[ts.length - 1]!
  const plotW = W - M.left - M.right
  const plotH = H - M.top - M.bottom
  const y = (v: number) => {
    const f = log ? (Math.log10(Math.max(v, lo)) - Math.log10(lo)) / (Math.log10(hi) - Math.log10(lo) || 1) : (v - lo) / (hi - lo || 1)
    return M.top + plotH - f * plotH
  }
  const parts = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="sans-serif" font-size="12">`,
    `<rect width="${W}" height="${H}" fill="#fff"/>`,
    `<text x="${W / 2}" y="22" text-anchor="middle" font-size="15" font-weight="bold">${esc(title)}</text>`,
    `<text transform="translate(18,${M.top + plotH / 2}) rotate(-90)" text-anchor="middle">${esc(yLabel)}</text>`
  ]
  for (const t of ts) {
    const ty = y(t)
    parts.push(`<line x1="${M.left}" x2="${M.left + plotW}" y1="${ty}" y2="${ty}" stroke="#e5e5e5"/>`)
    parts.push(`<text x="${M.left - 6}" y="${ty + 4}" text-anchor="end">${fmt(t)}</text>`)
  }
  parts.push(`<line x1="${M.left}" x2="${M.left}" y1="${M.top}" y2="${M.top + plotH}" stroke="#333"/>`)
  parts.push(`<line x1="${M.left}" x2="${M.left + plotW}" y1="${M.top + plotH}" y2="${M.top + plotH}" stroke="#333"/>`)
  return { y, parts, plotW, plotH }
}

const legend = (names: ReadonlyArray<string>): string[] => {
  const out: string[] = []
  let x = M.left
  const y = H - 18
  names.forEach((name, i) => {
    out.push(`<rect x="${x}" y="${y - 10}" width="12" height="12" fill="${COLORS[i % COLORS.length]}"/>`)
    out.push(`<text x="${x + 16}" y="${y}">${esc(name)}</text>`)
    x += 28 + name.length * 7
  })
  return out
}

export interface BarSeries {
  readonly name: string
  /** One value per category; NaN leaves a gap. */
  readonly values: ReadonlyArray<number>
}

/** Grouped bars: one group per category, one bar per series. */
export const barChart = (options: {
  title: string
  yLabel: string
  categories: ReadonlyArray<string>
  series: ReadonlyArray<BarSeries>
  log?: boolean
}): string => {
  const log = options.log ?? false
  const f = frame(options.title, options.yLabel, options.series.flatMap((s) => s.values), log)
  const groupW = f.plotW / Math.max(1, options.categories.length)
  const barW = (groupW * 0.8) / Math.max(1, options.series.length)
  const base = M.top + f.plotH
  options.categories.forEach((cat, c) => {
    const gx = M.left + c * groupW + groupW * 0.1
    options.series.forEach((s, i) => {
      const v = s.values[c]
      if (v === undefined || !Number.isFinite(v)) return
      const top = f.y(v)
      f.parts.push(`<rect x="${gx + i * barW}" y="${top}" width="${Math.max(1, barW - 2)}" height="${Math.max(0, base - top)}" fill="${COLORS[i % COLORS.length]}"><title>${esc(`${s.name} ${cat}: ${fmt(v)}`)}</title></rect>`)
    })
    f.parts.push(`<text x="${M.left + c * groupW + groupW / 2}" y="${base + 16}" text-anchor="middle">${esc(cat)}</text>`)
  })
  return [...f.parts, ...legend(options.series.map((s) => s.name)), "</svg>"].join("\n")
}

export interface LineSeries {
  readonly name: string
  readonly points: ReadonlyArray<readonly [number, number]>
}

/** Lines over a numeric x axis (points drawn as dots). */
export const lineChart = (options: {
  title: string
  xLabel: string
  yLabel: string
  series: ReadonlyArray<LineSeries>
  log?: boolean
}): string => {
  const log = options.log ?? false
  const ys = options.series.flatMap((s) => s.points.map((p) => p[1]))
  const xs = options.series.flatMap((s) => s.points.map((p) => p[0]))
  const f = frame(options.title, options.yLabel, ys, log)
  const xMax = xs.length === 0 ? 1 : Math.max(...xs)
  const xt = ticks(0, xMax * 1.05, false)
  const xHi = xt[xt.length - 1]!
  const x = (v: number) => M.left + (v / xHi) * f.plotW
  const base = M.top + f.plotH
  for (const t of xt) f.parts.push(`<text x="${x(t)}" y="${base + 16}" text-anchor="middle">${fmt(t)}</text>`)
  f.parts.push(`<text x="${M.left + f.plotW / 2}" y="${base + 34}" text-anchor="middle">${esc(options.xLabel)}</text>`)
  options.series.forEach((s, i) => {
    const color = COLORS[i % COLORS.length]
    const pts = s.points.filter((p) => Number.isFinite(p[1]) && (!log || p[1] > 0))
    if (pts.length > 1) f.parts.push(`<polyline fill="none" stroke="${color}" stroke-width="2" points="${pts.map((p) => `${x(p[0]).toFixed(1)},${f.y(p[1]).toFixed(1)}`).join(" ")}"/>`)
    for (const p of pts) f.parts.push(`<circle cx="${x(p[0]).toFixed(1)}" cy="${f.y(p[1]).toFixed(1)}" r="3" fill="${color}"><title>${esc(`${s.name} @ ${fmt(p[0])}: ${fmt(p[1])}`)}</title></circle>`)
  })
  return [...f.parts, ...legend(options.series.map((s) => s.name)), "</svg>"].join("\n")
}
