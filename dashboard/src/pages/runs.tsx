/** Runs, newest first, filtered by status; operators see every key's runs, key holders their own. */
import { useState } from "preact/hooks"
import { type RunView, type Session } from "../api.ts"
import { Empty, ErrorNotice, Loading, PageHeader, RunStatus, TableScroll } from "../components.tsx"
import { dateTime, int, usd } from "../format.ts"
import { useCursorList } from "../cursor-list.ts"
import { onLinkClick } from "../router.ts"

export const STATUSES = ["running", "requires_action", "completed", "failed", "cancelled", "incomplete"] as const

export const RunsPage = ({ session }: { session: Session }) => {
  const [status, setStatus] = useState("")
  const { items: runs, cursor, loading, error, reload, more } = useCursorList<RunView>("/runs", { status })
  return (
    <>
      <PageHeader title="Runs">
        <select aria-label="Status" value={status} onChange={(e) => setStatus((e.target as HTMLSelectElement).value)}>
          <option value="">Every status</option>
          {STATUSES.map((s) => <option value={s}>{s.replace("_", " ")}</option>)}
        </select>
        <button type="button" class="outline secondary" onClick={() => reload()} aria-busy={loading}>Refresh</button>
      </PageHeader>
      {error && <ErrorNotice message={error} retry={() => reload()} />}
      {runs === undefined && loading && <Loading what="runs" />}
      {runs !== undefined && runs.length === 0 && (
        <Empty title={status ? `No ${status.replace("_", " ")} runs` : "No runs yet"}>
          Runs are created with <code>POST /v1/agent-runs</code>{session.role === "key" ? " using this key" : ""}; they appear here as they start.
        </Empty>
      )}
      {runs !== undefined && runs.length > 0 && (
        <TableScroll label="Runs">
          <table class="striped">
            <thead>
              <tr><th>Run</th>{session.role === "operator" && <th>Key</th>}<th>Model</th><th>Status</th><th class="num">Tokens</th><th class="num">Cost</th><th>Created</th></tr>
            </thead>
            <tbody>
              {runs.map((run) => (
                <tr data-run-id={run.id}>
                  <td class="mono"><a href={`/dashboard/runs/${run.id}`} onClick={onLinkClick}>{run.id}</a></td>
                  {session.role === "operator" && <td>{run.key?.name ?? <span class="muted">unnamed</span>} <small class="muted mono">{run.key?.hint ?? run.keyId}</small></td>}
                  <td class="mono">{run.model ?? <span class="muted">caller-driven</span>}</td>
                  <td><RunStatus status={run.status} /></td>
                  <td class="num">{int(run.usage.inputTokens + run.usage.outputTokens)}</td>
                  <td class="num">{usd(run.usage.costUsd)}</td>
                  <td>{dateTime(run.createdAt)}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </TableScroll>
      )}
      {cursor && <button type="button" class="outline" aria-busy={loading} onClick={() => more()}>Load older runs</button>}
    </>
  )
}
