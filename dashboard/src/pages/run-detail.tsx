/** One run: its record, its event log (live while the run is), and cancel. */
import { useEffect, useState } from "preact/hooks"
import { api, messageOf, type RunView, type Session } from "../api.ts"
import { Confirm, Empty, ErrorNotice, Loading, PageHeader, RunStatus, useLoad } from "../components.tsx"
import { dateTime, int, usd } from "../format.ts"
import { onLinkClick } from "../router.ts"
import { readSse } from "../sse.ts"

interface LogEvent {
  readonly seq: number
  readonly type: string
  readonly [field: string]: unknown
}

const TERMINAL = new Set(["completed", "failed", "cancelled", "incomplete"])

/** One line that says what an event is about; the whole event is one click away. */
const summary = (event: LogEvent): string => {
  switch (event.type) {
    case "node.started":
      return `step ${String(event.turn ?? "")} on ${String(event.model ?? "")}`
    case "node.completed": {
      const output = Array.isArray(event.output) ? event.output as ReadonlyArray<{ type: string; text?: string; name?: string }> : []
      const text = output.filter((b) => b.type === "text").map((b) => b.text ?? "").join(" ")
      const tools = output.filter((b) => b.type === "tool_use").map((b) => b.name).join(", ")
      return `${String(event.model ?? "")} · ${String(event.stopReason ?? "")}${tools ? ` · calls ${tools}` : ""}${text ? ` · “${text.slice(0, 140)}${text.length > 140 ? "…" : ""}”` : ""}`
    }
    case "outcome":
      return `${String(event.status ?? "")}${event.reason ? ` · ${String(event.reason)}` : ""}`
    case "run.resumed":
      return `attempt ${String(event.attempt ?? "")}`
    case "tool.result":
      return `result for ${String(event.toolUseId ?? "")}`
    default:
      return ""
  }
}

const useRunLog = (runId: string, onChange: () => void) => {
  const [events, setEvents] = useState<ReadonlyArray<LogEvent>>([])
  const [state, setState] = useState<"connecting" | "live" | "done" | "retrying">("connecting")
  const [error, setError] = useState<string>()
  useEffect(() => {
    const abort = new AbortController()
    let last = 0
    const connect = async () => {
      while (!abort.signal.aborted) {
        try {
          await readSse(`/dashboard/api/runs/${runId}/events?after=${last}`, (frame) => {
            if (frame.event === "done") {
              setState("done")
              abort.abort()
              return
            }
            const event = JSON.parse(frame.data) as LogEvent
            last = Math.max(last, event.seq)
            setEvents((old) => [...old, event])
            setState("live")
            onChange()
          }, abort.signal, () => setState((old) => (old === "done" ? old : "live")))
        } catch (e) {
          if (abort.signal.aborted) return
          if ((e as { status?: number }).status !== undefined) {
            setError(messageOf(e))
            return
          }
        }
        if (abort.signal.aborted) return
        setState("retrying")
        await new Promise((resolve) => setTimeout(resolve, 2000))
      }
    }
    void connect()
    return () => abort.abort()
  }, [runId])
  return { events, state, error }
}

export const RunDetailPage = ({ runId, session }: { runId: string; session: Session }) => {
  const run = useLoad(() => api<{ run: RunView }>(`/runs/${encodeURIComponent(runId)}`), [runId])
  const log = useRunLog(runId, run.reload)
  const [confirming, setConfirming] = useState(false)
  const view = run.data?.run
  return (
    <>
      <p><a href="/dashboard/runs" onClick={onLinkClick}>← Runs</a></p>
      <PageHeader title={`Run ${runId}`}>
        {view && !TERMINAL.has(view.status) && (
          <button type="button" class="outline danger" onClick={() => setConfirming(true)}>Cancel run</button>
        )}
      </PageHeader>
      {run.error && <ErrorNotice message={run.error} retry={run.reload} />}
      {view === undefined && run.loading && <Loading what="the run" />}
      {view && (
        <article class="run-record">
          <dl>
            <div><dt>Status</dt><dd><RunStatus status={view.status} />{view.outcome?.reason && <small class="muted"> {view.outcome.reason}</small>}</dd></div>
            <div><dt>Model</dt><dd class="mono">{view.model ?? "caller-driven"}</dd></div>
            {session.role === "operator" && <div><dt>Key</dt><dd class="mono">{view.keyId}</dd></div>}
            <div><dt>Tokens</dt><dd>{int(view.usage.inputTokens)} in · {int(view.usage.outputTokens)} out</dd></div>
            <div><dt>Cost</dt><dd>{usd(view.usage.costUsd)}</dd></div>
            <div><dt>Created</dt><dd>{dateTime(view.createdAt)}</dd></div>
            {view.finishedAt && <div><dt>Finished</dt><dd>{dateTime(view.finishedAt)}</dd></div>}
            {view.parentRunId && <div><dt>Parent</dt><dd class="mono"><a href={`/dashboard/runs/${view.parentRunId}`} onClick={onLinkClick}>{view.parentRunId}</a></dd></div>}
          </dl>
        </article>
      )}
      <h2>
        Event log{" "}
        <small class={`live live-${log.state === "done" ? "ended" : log.state}`} data-testid="run-log-state">
          {log.state === "live" ? "live" : log.state === "done" ? "complete" : log.state === "retrying" ? "reconnecting…" : "connecting…"}
        </small>
      </h2>
      {log.error && <ErrorNotice message={log.error} />}
      {log.events.length === 0 && log.state !== "connecting" && <Empty title="No events yet">Events appear here as the run writes them.</Empty>}
      <ol class="event-log">
        {log.events.map((event) => (
          <li data-seq={event.seq}>
            <details>
              <summary><span class="mono seq">#{event.seq}</span> <strong>{event.type}</strong> <span class="muted">{summary(event)}</span></summary>
              <pre>{JSON.stringify(event, null, 2)}</pre>
            </details>
          </li>
        ))}
      </ol>
      {confirming && (
        <Confirm title="Cancel this run?" action="Cancel run" danger onClose={() => setConfirming(false)}
          onConfirm={async () => {
            await api(`/runs/${encodeURIComponent(runId)}/cancel`, { method: "POST", body: {} })
            run.reload()
          }}>
          <p>The step in flight stops (its partial cost is still charged) and the run ends <strong>cancelled</strong>, with its live child runs.</p>
        </Confirm>
      )}
    </>
  )
}
