/**
 * Charts with Chart.js: only the controllers and elements the dashboard draws are registered, so
 * the bundle carries nothing else. Colors follow the page (light or dark) through Pico's CSS
 * variables.
 */
import {
  ArcElement,
  BarController,
  BarElement,
  CategoryScale,
  Chart,
  type ChartConfiguration,
  DoughnutController,
  Legend,
  LinearScale,
  Tooltip
} from "chart.js"
import { useEffect, useRef } from "preact/hooks"

Chart.register(BarController, BarElement, CategoryScale, LinearScale, DoughnutController, ArcElement, Legend, Tooltip)

/** A palette that stays distinct in light and dark mode (Okabe–Ito, colour-blind safe). */
export const PALETTE = ["#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#7F7F7F", "#332288", "#117733"]
export const colorAt = (i: number) => PALETTE[i % PALETTE.length]

const cssVar = (name: string, fallback: string) =>
  getComputedStyle(document.documentElement).getPropertyValue(name).trim() || fallback

/** A Chart.js chart in a sized box; the chart is updated in place when `config` changes. */
export const ChartView = ({ config, label, height = 260 }: { config: ChartConfiguration; label: string; height?: number }) => {
  const canvas = useRef<HTMLCanvasElement>(null)
  const chart = useRef<Chart | undefined>(undefined)
  useEffect(() => {
    Chart.defaults.color = cssVar("--pico-muted-color", "#666")
    Chart.defaults.borderColor = cssVar("--pico-muted-border-color", "#ddd")
    Chart.defaults.font.family = cssVar("--pico-font-family", "system-ui, sans-serif")
    chart.current = new Chart(canvas.current!, config)
    return () => chart.current?.destroy()
  }, [])
  useEffect(() => {
    const current = chart.current
    if (current === undefined) return
    current.data = config.data
    if (config.options) current.options = config.options
    current.update()
  }, [config])
  return (
    <div class="chart" style={{ height: `${height}px` }}>
      <canvas ref={canvas} role="img" aria-label={label} />
    </div>
  )
}
