/** One batch: its status, request counts, times and files, and cancel (with confirmation). */
import { useState } from "preact/hooks"
import { api, type BatchDetail, type Session } from "../api.ts"
import { Confirm, ErrorNotice, Loading, PageHeader, useLoad } from "../components.tsx"
import { dateTime, int } from "../format.ts"
import { onLinkClick } from "../router.ts"
import { BatchStatus, KIND_NAMES } from "./batches.tsx"

export const BatchDetailPage = ({ batchId, session }: { batchId: string; session: Session }) => {
  const detail = useLoad(() => api<{ batch: BatchDetail }>(`/batches/${encodeURIComponent(batchId)}`), [batchId])
  const [confirming, setConfirming] = useState(false)
  const b = detail.data?.batch
  const cancellable = b !== undefined && !b.ended && b.cancelInitiatedAt === null
  return (
    <>
      <p><a href="/dashboard/batches" onClick={onLinkClick}>← Batches</a></p>
      <PageHeader title={`Batch ${batchId}`}>
        {cancellable && <button type="button" class="outline danger" onClick={() => setConfirming(true)}>Cancel batch</button>}
        <button type="button" class="outline secondary" onClick={detail.reload} aria-busy={detail.loading}>Refresh</button>
      </PageHeader>
      {detail.error && <ErrorNotice message={detail.error} retry={detail.reload} />}
      {b === undefined && detail.loading && <Loading what="the batch" />}
      {b && (
        <>
          <div class="stats batch-counts">
            <article class="stat"><span class="muted">Requests</span><strong data-testid="batch-total">{int(b.total)}</strong></article>
            <article class="stat"><span class="muted">Processing</span><strong data-testid="batch-processing">{int(b.counts.processing)}</strong></article>
            <article class="stat"><span class="muted">Succeeded</span><strong data-testid="batch-succeeded">{int(b.counts.succeeded)}</strong></article>
            <article class="stat"><span class="muted">Errored</span><strong data-testid="batch-errored">{int(b.counts.errored)}</strong></article>
            <article class="stat"><span class="muted">Canceled</span><strong data-testid="batch-canceled">{int(b.counts.canceled)}</strong></article>
            <article class="stat"><span class="muted">Expired</span><strong data-testid="batch-expired">{int(b.counts.expired)}</strong></article>
          </div>
          <article class="run-record batch-record">
            <dl>
              <div><dt>Status</dt><dd data-testid="batch-status"><BatchStatus status={b.status} /></dd></div>
              <div><dt>Kind</dt><dd>{KIND_NAMES[b.kind]} <small class="muted mono">{b.endpoint}</small></dd></div>
              {session.role === "operator" && <div><dt>Key</dt><dd>{b.key.name ?? <span class="muted">unnamed</span>} <small class="muted mono">{b.key.hint ?? b.keyId}</small></dd></div>}
              <div><dt>Created</dt><dd>{dateTime(b.createdAt)}</dd></div>
              {b.cancelInitiatedAt && <div><dt>Cancel asked</dt><dd>{dateTime(b.cancelInitiatedAt)}</dd></div>}
              <div><dt>Ended</dt><dd>{b.endedAt ? dateTime(b.endedAt) : <span class="muted">not yet</span>}</dd></div>
              {!b.ended && <div><dt>Expires</dt><dd>{dateTime(b.expiresAt)}</dd></div>}
              {b.inputFileId && <div><dt>Input file</dt><dd class="mono">{b.inputFileId}</dd></div>}
              {b.outputFileId && <div><dt>Output file</dt><dd class="mono">{b.outputFileId}</dd></div>}
              {b.errorFileId && <div><dt>Error file</dt><dd class="mono">{b.errorFileId}</dd></div>}
              {b.resultsPath && <div class="wide"><dt>Results</dt><dd class="mono">GET {b.resultsPath}</dd></div>}
            </dl>
          </article>
          {b.metadata !== null && (
            <details>
              <summary>Metadata</summary>
              <pre>{JSON.stringify(b.metadata, null, 2)}</pre>
            </details>
          )}
          {b.errors !== null && (
            <details open>
              <summary>Errors</summary>
              <pre>{JSON.stringify(b.errors, null, 2)}</pre>
            </details>
          )}
        </>
      )}
      {confirming && (
        <Confirm title="Cancel this batch?" action="Cancel batch" danger onClose={() => setConfirming(false)}
          onConfirm={async () => {
            await api(`/batches/${encodeURIComponent(batchId)}/cancel`, { method: "POST", body: {} })
            detail.reload()
          }}>
          <p>Requests not yet started end <strong>canceled</strong> at once; requests in flight finish and keep their results. This cannot be undone.</p>
        </Confirm>
      )}
    </>
  )
}
