/** Key holders: their key, its allowance and its rate-limit windows (refreshed every 3 s). */
import type { ChartConfiguration } from "chart.js"
import { useEffect, useMemo } from "preact/hooks"
import { api, type MyKey } from "../api.ts"
import { ChartView, colorAt } from "../charts.tsx"
import { Badge, ErrorNotice, Loading, PageHeader, useLoad } from "../components.tsx"
import { date, duration, int, monthName, usd } from "../format.ts"

const Window = ({ label, remaining, limit, resetMs, testId }: { label: string; remaining: number; limit: number; resetMs: number; testId: string }) => (
  <article class="stat">
    <small class="muted">{label}</small>
    <strong data-testid={testId}>{int(remaining)} <small class="muted">of {int(limit)} left</small></strong>
    <progress value={limit - remaining} max={limit} />
    <small class="muted">{resetMs > 0 ? `full again in ${duration(resetMs)}` : "full"}</small>
  </article>
)

export const MyKeyPage = () => {
  const mine = useLoad(() => api<MyKey>("/my-key"))
  useEffect(() => {
    const timer = setInterval(mine.reload, 3000)
    return () => clearInterval(timer)
  }, [mine.reload])
  const data = mine.data
  const allowance = data?.allowance
  const chart = useMemo((): ChartConfiguration | undefined => allowance ? {
    type: "doughnut",
    data: {
      labels: allowance.kind === "monthly" ? ["used", "remaining"] : ["spent", "balance"],
      datasets: [{ data: [Number(allowance.usedUsd), Number(allowance.remainingUsd)], backgroundColor: [colorAt(5), colorAt(2)] }]
    },
    options: {
      responsive: true, maintainAspectRatio: false, animation: false,
      plugins: { legend: { position: "bottom" }, tooltip: { callbacks: { label: (c) => `${c.label}: ${usd(Number(c.raw))}` } } }
    }
  } : undefined, [allowance?.usedUsd, allowance?.remainingUsd, allowance?.kind])
  return (
    <>
      <PageHeader title="My key" />
      {mine.error && <ErrorNotice message={mine.error} retry={mine.reload} />}
      {data === undefined && mine.loading && <Loading what="your key" />}
      {data && (
        <>
          <article>
            <dl class="key-facts">
              <div><dt>Name</dt><dd>{data.key.name ?? <span class="muted">unnamed</span>}</dd></div>
              <div><dt>Key</dt><dd class="mono">{data.key.hint}</dd></div>
              <div><dt>Plan</dt><dd>{data.key.plan}</dd></div>
              <div><dt>Created</dt><dd>{date(data.key.createdAt)}</dd></div>
              <div><dt>Surfaces</dt><dd>{data.key.permissions.surfaces === null ? "all" : data.key.permissions.surfaces.map((s) => <span class="chip">{s}</span>)}</dd></div>
              <div><dt>Models</dt><dd>{data.key.permissions.models === null ? "all" : data.key.permissions.models.map((s) => <span class="chip mono">{s}</span>)}</dd></div>
            </dl>
          </article>
          <div class="grid-2">
            <article>
              <header>{allowance?.kind === "credits" ? "Prepaid credits" : `Allowance${allowance?.month ? ` for ${monthName(allowance.month)}` : ""}`}</header>
              {allowance && chart
                ? (
                  <>
                    <p class="big" data-testid="allowance-remaining">{usd(allowance.remainingUsd)} <small class="muted">left{allowance.limitUsd ? ` of ${usd(allowance.limitUsd)}` : ""}</small></p>
                    <ChartView config={chart} label="Allowance used and remaining" height={200} />
                  </>
                )
                : <p class="muted">The allowance store cannot be read right now; try again shortly.</p>}
            </article>
            <article>
              <header>Rate limits <small class="muted">· refreshed every 3 s</small></header>
              {data.rateLimits
                ? (
                  <div class="stats stats-stack">
                    <Window label="Requests per minute" testId="rpm-remaining" {...data.rateLimits.requestsPerMinute} />
                    <Window label="Tokens per minute" testId="tpm-remaining" {...data.rateLimits.tokensPerMinute} />
                    <article class="stat">
                      <small class="muted">Requests in flight</small>
                      <strong>{data.rateLimits.concurrency.inFlight} <small class="muted">of {data.rateLimits.concurrency.limit}</small></strong>
                    </article>
                  </div>
                )
                : <p class="muted"><Badge tone="muted">not enforced</Badge> Rate limits are off on this gateway, or cannot be read right now.</p>}
            </article>
          </div>
        </>
      )}
    </>
  )
}
