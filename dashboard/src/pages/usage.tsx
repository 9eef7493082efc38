/**
 * Usage for a month (UTC): cost and tokens per day by model (charts), allowance used vs remaining
 * per key, and the tables behind the charts. Key holders see only their own key.
 */
import type { ChartConfiguration } from "chart.js"
import { useEffect, useMemo, useState } from "preact/hooks"
import { api, type Session, type UsageReport } from "../api.ts"
import { ChartView, colorAt } from "../charts.tsx"
import { AllowanceBar, Empty, ErrorNotice, Loading, PageHeader, TableScroll, useLoad } from "../components.tsx"
import { int, keyLabel, monthName, shiftMonth, short, usd } from "../format.ts"

const currentMonth = () => new Date().toISOString().slice(0, 7)

const costChart = (report: UsageReport): ChartConfiguration => {
  const models = report.byModel.map((m) => m.model)
  return {
    type: "bar",
    data: {
      labels: report.days.map((d) => d.slice(8)),
      datasets: models.map((model, i) => ({
        label: model,
        backgroundColor: colorAt(i),
        data: report.days.map((day) => Number(report.daily.find((r) => r.day === day && r.model === model)?.costUsd ?? 0))
      }))
    },
    options: {
      responsive: true, maintainAspectRatio: false, animation: false,
      scales: { x: { stacked: true, title: { display: true, text: "day" } }, y: { stacked: true, beginAtZero: true, ticks: { callback: (v) => usd(Number(v)) } } },
      plugins: { tooltip: { callbacks: { label: (c) => `${c.dataset.label}: ${usd(Number(c.raw))}` } }, legend: { position: "bottom" } }
    }
  }
}

const tokenChart = (report: UsageReport): ChartConfiguration => {
  const sum = (day: string, field: "inputTokens" | "outputTokens") =>
    report.daily.filter((r) => r.day === day).reduce((n, r) => n + r[field], 0)
  return {
    type: "bar",
    data: {
      labels: report.days.map((d) => d.slice(8)),
      datasets: [
        { label: "input tokens", backgroundColor: colorAt(0), data: report.days.map((d) => sum(d, "inputTokens")) },
        { label: "output tokens", backgroundColor: colorAt(1), data: report.days.map((d) => sum(d, "outputTokens")) }
      ]
    },
    options: {
      responsive: true, maintainAspectRatio: false, animation: false,
      scales: { x: { stacked: true, title: { display: true, text: "day" } }, y: { stacked: true, beginAtZero: true, ticks: { callback: (v) => short(Number(v)) } } },
      plugins: { legend: { position: "bottom" } }
    }
  }
}

/** Used vs remaining as shares of each key's cap, so keys on different plans compare at a glance. */
const allowanceChart = (report: UsageReport): ChartConfiguration | undefined => {
  const rows = report.byKey.filter((k) => k.allowance?.kind === "monthly" && Number(k.allowance.limitUsd) > 0).slice(0, 12)
  if (rows.length === 0) return undefined
  const share = (usd: string, k: typeof rows[number]) => (100 * Number(usd)) / Number(k.allowance!.limitUsd)
  const dollars = [rows.map((k) => k.allowance!.usedUsd), rows.map((k) => k.allowance!.remainingUsd)]
  return {
    type: "bar",
    data: {
      labels: rows.map((k) => `${keyLabel(k)} (${usd(k.allowance!.limitUsd!)})`),
      datasets: [
        { label: "used", backgroundColor: colorAt(5), data: rows.map((k) => share(k.allowance!.usedUsd, k)) },
        { label: "remaining", backgroundColor: colorAt(2), data: rows.map((k) => share(k.allowance!.remainingUsd, k)) }
      ]
    },
    options: {
      indexAxis: "y", responsive: true, maintainAspectRatio: false, animation: false,
      scales: { x: { stacked: true, min: 0, max: 100, ticks: { callback: (v) => `${v}%` } }, y: { stacked: true } },
      plugins: {
        tooltip: { callbacks: { label: (c) => `${c.dataset.label}: ${usd(dollars[c.datasetIndex][c.dataIndex])} (${Number(c.raw).toFixed(1)}%)` } },
        legend: { position: "bottom" }
      }
    }
  }
}

const Stat = ({ label, value, testId }: { label: string; value: string; testId?: string }) => (
  <article class="stat"><small class="muted">{label}</small><strong data-testid={testId}>{value}</strong></article>
)

export const UsagePage = ({ session }: { session: Session }) => {
  const [month, setMonth] = useState(currentMonth())
  const [keyId, setKeyId] = useState("")
  const usage = useLoad(
    () => api<UsageReport>(`/usage?month=${month}${keyId ? `&keyId=${encodeURIComponent(keyId)}` : ""}`),
    [month, keyId]
  )
  // The current month keeps moving: refresh it every 15 s while the tab is visible.
  useEffect(() => {
    if (month !== currentMonth()) return
    const timer = setInterval(() => document.visibilityState === "visible" && usage.reload(), 15_000)
    return () => clearInterval(timer)
  }, [month, usage.reload])
  const report = usage.data
  const charts = useMemo(() => report && { cost: costChart(report), tokens: tokenChart(report), allowance: allowanceChart(report) }, [report])
  const operator = session.role === "operator"
  return (
    <>
      <PageHeader title="Usage">
        <div class="month-picker" role="group">
          <button type="button" class="outline secondary" aria-label="Previous month" onClick={() => setMonth(shiftMonth(month, -1))}>‹</button>
          <span class="month" aria-live="polite">{monthName(month)}</span>
          <button type="button" class="outline secondary" aria-label="Next month" disabled={month >= currentMonth()} onClick={() => setMonth(shiftMonth(month, 1))}>›</button>
        </div>
        {operator && report && (
          <select aria-label="Key" value={keyId} onChange={(e) => setKeyId((e.target as HTMLSelectElement).value)}>
            <option value="">All keys</option>
            {report.byKey.map((k) => <option value={k.keyId}>{keyLabel(k)} ({k.hint})</option>)}
          </select>
        )}
        <button type="button" class="outline secondary" onClick={usage.reload} aria-busy={usage.loading}>Refresh</button>
      </PageHeader>
      {month === currentMonth() && <p class="muted hint"><small>This month refreshes every 15 seconds. Days are UTC.</small></p>}
      {usage.error && <ErrorNotice message={usage.error} retry={usage.reload} />}
      {report === undefined && usage.loading && <Loading what="usage" />}
      {report && charts && (
        <>
          <div class="stats">
            <Stat label="Cost" value={usd(report.totals.costUsd)} testId="usage-total-cost" />
            <Stat label="Requests" value={int(report.totals.requests)} testId="usage-total-requests" />
            <Stat label="Input tokens" value={short(report.totals.inputTokens)} />
            <Stat label="Output tokens" value={short(report.totals.outputTokens)} />
          </div>
          {report.totals.requests === 0 && (
            <Empty title={`No usage in ${monthName(report.month)}`}>
              Calls made with {operator && !keyId ? "any key" : "this key"} appear here about a second after they end.
            </Empty>
          )}
          {report.totals.requests > 0 && <div class="grid-2">
            <article>
              <header>Cost per day, by model</header>
              <ChartView config={charts.cost} label="Cost per day by model" />
            </article>
            <article>
              <header>Tokens per day</header>
              <ChartView config={charts.tokens} label="Input and output tokens per day" />
            </article>
          </div>}
          <article>
            <header>Allowance this month: used vs remaining</header>
            {charts.allowance
              ? <ChartView config={charts.allowance} label="Allowance used and remaining per key" height={Math.max(120, 40 * Math.min(12, report.byKey.length) + 60)} />
              : <p class="muted">{report.month === currentMonth() ? "No key on a monthly allowance." : "Allowances are shown for the current month only."}</p>}
          </article>
          <article>
            <header>By key</header>
            <TableScroll label="Usage by key">
              <table class="striped">
                <thead><tr><th>Key</th><th>Plan</th><th class="num">Requests</th><th class="num">Input</th><th class="num">Output</th><th class="num">Cost</th><th>Allowance</th></tr></thead>
                <tbody>
                  {report.byKey.map((k) => (
                    <tr data-key-id={k.keyId}>
                      <td>{keyLabel(k)} <small class="muted mono">{k.hint}</small></td>
                      <td>{k.plan}</td>
                      <td class="num">{int(k.requests)}</td>
                      <td class="num">{int(k.inputTokens)}</td>
                      <td class="num">{int(k.outputTokens)}</td>
                      <td class="num">{usd(k.costUsd)}</td>
                      <td><AllowanceBar allowance={k.allowance} /></td>
                    </tr>
                  ))}
                </tbody>
              </table>
            </TableScroll>
          </article>
          {report.daily.length > 0 && <article>
            <header>By day and model</header>
            {(
                <TableScroll label="Usage by day and model">
                  <table class="striped">
                    <thead><tr><th>Day</th><th>Model</th><th class="num">Requests</th><th class="num">Input</th><th class="num">Cached</th><th class="num">Output</th><th class="num">Cost</th></tr></thead>
                    <tbody>
                      {report.daily.map((r) => (
                        <tr>
                          <td>{r.day}</td><td class="mono">{r.model}</td><td class="num">{int(r.requests)}</td><td class="num">{int(r.inputTokens)}</td>
                          <td class="num">{int(r.cachedInputTokens)}</td><td class="num">{int(r.outputTokens)}</td><td class="num">{usd(r.costUsd)}</td>
                        </tr>
                      ))}
                    </tbody>
                  </table>
                </TableScroll>
              )}
          </article>}
        </>
      )}
    </>
  )
}
