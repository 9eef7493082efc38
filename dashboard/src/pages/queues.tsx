/**
 * Operators: every placement's queue, live. The page listens to the gateway's SSE feed
 * (`/dashboard/api/queues/stream`), which sends a new snapshot whenever something changed;
 * the browser reconnects by itself if the connection drops.
 */
import { useEffect, useState } from "preact/hooks"
import type { QueueView } from "../api.ts"
import { Badge, Empty, Loading, PageHeader, TableScroll, type Tone } from "../components.tsx"
import { keyLabel } from "../format.ts"

const CIRCUIT: Record<QueueView["circuit"], { tone: Tone; text: string }> = {
  closed: { tone: "good", text: "closed" },
  half_open: { tone: "warn", text: "half-open" },
  open: { tone: "bad", text: "open" }
}

type Feed = { state: "connecting" | "live" | "retrying" | "ended"; at?: string; data?: ReadonlyArray<QueueView> }

const useQueueFeed = (onSignedOut: (reason: string) => void) => {
  const [feed, setFeed] = useState<Feed>({ state: "connecting" })
  useEffect(() => {
    const source = new EventSource("/dashboard/api/queues/stream")
    source.addEventListener("queues", (event) => {
      const body = JSON.parse((event as MessageEvent<string>).data) as { at: string; data: ReadonlyArray<QueueView> }
      setFeed({ state: "live", at: body.at, data: body.data })
    })
    source.addEventListener("signed-out", (event) => {
      source.close()
      setFeed((f) => ({ ...f, state: "ended" }))
      onSignedOut((JSON.parse((event as MessageEvent<string>).data) as { message: string }).message)
    })
    source.onerror = () => setFeed((f) => ({ ...f, state: source.readyState === EventSource.CLOSED ? "ended" : "retrying" }))
    return () => source.close()
  }, [])
  return feed
}

const Slots = ({ q }: { q: QueueView }) => (
  <div class="slots">
    <progress value={q.inUse} max={Math.max(1, q.capacity)} class={q.inUse >= q.capacity ? "over" : ""} />
    <small data-testid={`in-use-${q.placementId}`}>{q.inUse} / {q.capacity}</small>
  </div>
)

export const QueuesPage = ({ onSignedOut }: { onSignedOut: (reason: string) => void }) => {
  const feed = useQueueFeed(onSignedOut)
  const data = feed.data
  const byModel = new Map<string, Array<QueueView>>()
  for (const q of data ?? []) {
    const model = q.modelId ?? "unknown model"
    byModel.set(model, [...(byModel.get(model) ?? []), q])
  }
  const inFlight = data?.reduce((n, q) => n + q.inUse, 0) ?? 0
  const waiting = data?.reduce((n, q) => n + q.waiting, 0) ?? 0
  const open = data?.filter((q) => q.circuit !== "closed").length ?? 0
  const faults = data?.filter((q) => q.fault !== null).length ?? 0
  return (
    <>
      <PageHeader title="Queues">
        <span class={`live live-${feed.state}`} role="status" data-testid="queues-live">
          {feed.state === "live" ? "Live" : feed.state === "retrying" ? "Reconnecting…" : feed.state === "ended" ? "Disconnected: reload the page" : "Connecting…"}
          {feed.at && <small class="muted"> · updated {new Date(feed.at).toLocaleTimeString("en-US", { hour12: false })}</small>}
        </span>
      </PageHeader>
      {data === undefined && <Loading what="queues" />}
      {data !== undefined && data.length === 0 && <Empty title="No placements">The catalog has no placements to queue for.</Empty>}
      {data !== undefined && data.length > 0 && (
        <>
          <div class="stats">
            <article class="stat"><small class="muted">In flight</small><strong data-testid="queues-in-flight">{inFlight}</strong></article>
            <article class="stat"><small class="muted">Waiting</small><strong data-testid="queues-waiting">{waiting}</strong></article>
            <article class="stat"><small class="muted">Circuits not closed</small><strong>{open}</strong></article>
            <article class="stat"><small class="muted">Faults injected</small><strong>{faults}</strong></article>
          </div>
          <TableScroll label="Placements">
            <table class="striped queues">
              <thead><tr><th>Model</th><th>Placement</th><th>Slots in use</th><th class="num">Waiting</th><th>Waiting by key</th><th>Circuit</th><th>Fault</th></tr></thead>
              <tbody>
                {[...byModel.entries()].flatMap(([model, queues]) =>
                  queues.map((q, i) => (
                    <tr data-placement={q.placementId}>
                      <td class="mono">{i === 0 ? model : ""}</td>
                      <td class="mono">{q.placementId} <small class="muted">{q.backend}</small></td>
                      <td><Slots q={q} /></td>
                      <td class="num">{q.waiting}</td>
                      <td>
                        {q.waitingByKey.length === 0
                          ? <span class="muted">—</span>
                          : q.waitingByKey.map((w) => <span class="chip">{keyLabel(w)}: {w.waiting}</span>)}
                      </td>
                      <td><Badge tone={CIRCUIT[q.circuit].tone}>{CIRCUIT[q.circuit].text}</Badge></td>
                      <td>
                        {q.fault === null
                          ? <span class="muted">none</span>
                          : <Badge tone="warn">{q.fault.mode}{q.fault.status ? ` ${q.fault.status}` : ""}{q.fault.rate !== undefined ? ` @ ${Math.round(q.fault.rate * 100)}%` : ""}</Badge>}
                      </td>
                    </tr>
                  ))
                )}
              </tbody>
            </table>
          </TableScroll>
          <p class="muted"><small>Faults are injected per instance with <code>POST /admin/v1/placements/&#123;id&#125;/faults</code>; this page shows the instance serving it.</small></p>
        </>
      )}
    </>
  )
}
