/**
 * Batches of both kinds, newest first: Messages batches (`/v1/messages/batches`) and OpenAI
 * batches (`/v1/batches`), with their status and request counts. Operators see every key's
 * (filtered by key), key holders their own. Each links to its detail (batch-detail.tsx).
 */
import { useState } from "preact/hooks"
import type { BatchListItem, Session } from "../api.ts"
import { Badge, Empty, ErrorNotice, Loading, PageHeader, TableScroll, KeyFilter, type Tone } from "../components.tsx"
import { dateTime, int } from "../format.ts"
import { useCursorList } from "../cursor-list.ts"
import { onLinkClick } from "../router.ts"

const STATUS_TONES: Record<string, Tone> = {
  in_progress: "info", validating: "info", finalizing: "info", canceling: "warn", cancelling: "warn",
  ended: "good", completed: "good", failed: "bad", expired: "warn", cancelled: "muted"
}
export const BatchStatus = ({ status }: { status: string }) => <Badge tone={STATUS_TONES[status] ?? "muted"}>{status.replace("_", " ")}</Badge>

export const KIND_NAMES: Record<BatchListItem["kind"], string> = { messages: "Messages", openai: "OpenAI" }

/** Requests: answered of total, with what did not succeed. */
export const Counts = ({ batch }: { batch: BatchListItem }) => {
  const c = batch.counts
  const done = c.succeeded + c.errored + c.canceled + c.expired
  const others = [
    c.errored > 0 && `${int(c.errored)} errored`,
    c.canceled > 0 && `${int(c.canceled)} canceled`,
    c.expired > 0 && `${int(c.expired)} expired`
  ].filter(Boolean)
  return (
    <span>
      {int(done)} / {int(batch.total)}
      {others.length > 0 && <small class="muted"> · {others.join(", ")}</small>}
    </span>
  )
}

export const BatchesPage = ({ session }: { session: Session }) => {
  const operator = session.role === "operator"
  const [keyId, setKeyId] = useState("")
  const [kind, setKind] = useState("")
  const { items, cursor, loading, error, reload, more } = useCursorList<BatchListItem>("/batches", { keyId, kind })
  return (
    <>
      <PageHeader title="Batches">
        <select aria-label="Kind" value={kind} onChange={(e) => setKind((e.target as HTMLSelectElement).value)}>
          <option value="">Both kinds</option>
          <option value="messages">Messages batches</option>
          <option value="openai">OpenAI batches</option>
        </select>
        {operator && <KeyFilter value={keyId} onChange={setKeyId} />}
        <button type="button" class="outline secondary" onClick={() => reload()} aria-busy={loading}>Refresh</button>
      </PageHeader>
      {error && <ErrorNotice message={error} retry={() => reload()} />}
      {items === undefined && loading && <Loading what="batches" />}
      {items !== undefined && items.length === 0 && (
        <Empty title={keyId || kind ? "No batches match" : "No batches yet"}>
          Batches are created with <code>POST /v1/messages/batches</code> or <code>POST /v1/batches</code>
          {operator ? "" : " using this key"}; they appear here as they are accepted.
        </Empty>
      )}
      {items !== undefined && items.length > 0 && (
        <TableScroll label="Batches">
          <table class="striped">
            <thead>
              <tr>
                <th>Batch</th><th>Kind</th>{operator && <th>Key</th>}<th>Status</th><th class="num">Requests done</th>
                <th>Created</th><th>Ended</th>
              </tr>
            </thead>
            <tbody>
              {items.map((b) => (
                <tr data-batch-id={b.id}>
                  <td class="mono"><a href={`/dashboard/batches/${b.id}`} onClick={onLinkClick}>{b.id}</a></td>
                  <td>{KIND_NAMES[b.kind]} <small class="muted mono">{b.endpoint}</small></td>
                  {operator && <td>{b.key.name ?? <span class="muted">unnamed</span>} <small class="muted mono">{b.key.hint ?? b.keyId}</small></td>}
                  <td><BatchStatus status={b.status} /></td>
                  <td class="num"><Counts batch={b} /></td>
                  <td>{dateTime(b.createdAt)}</td>
                  <td>{b.endedAt ? dateTime(b.endedAt) : <span class="muted">—</span>}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </TableScroll>
      )}
      {cursor && <button type="button" class="outline" aria-busy={loading} onClick={() => more()}>Load older batches</button>}
    </>
  )
}
