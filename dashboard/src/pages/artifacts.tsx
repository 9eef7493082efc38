/**
 * Artifacts, newest first: operators see every key's (filtered by key, read-only), key holders
 * their own. Each links to its descriptor, versions and a query form (artifact-detail.tsx).
 */
import { useState } from "preact/hooks"
import type { ArtifactListItem, Session } from "../api.ts"
import { Badge, Empty, ErrorNotice, Loading, PageHeader, TableScroll, KeyFilter } from "../components.tsx"
import { bytes, dateTime, int } from "../format.ts"
import { useCursorList } from "../cursor-list.ts"
import { onLinkClick } from "../router.ts"

export const ShapeBadge = ({ kind }: { kind: "table" | "text" }) =>
  <Badge tone={kind === "table" ? "info" : "muted"}>{kind}</Badge>

export const ArtifactsPage = ({ session }: { session: Session }) => {
  const operator = session.role === "operator"
  const [keyId, setKeyId] = useState("")
  const { items, cursor, loading, error, reload, more } = useCursorList<ArtifactListItem>("/artifacts", { keyId })
  return (
    <>
      <PageHeader title="Artifacts">
        {operator && <KeyFilter value={keyId} onChange={setKeyId} />}
        <button type="button" class="outline secondary" onClick={() => reload()} aria-busy={loading}>Refresh</button>
      </PageHeader>
      {operator && <p class="muted hint">Every key's artifacts, read-only. Keys upload, version and delete them through <code>/v1/artifacts</code>.</p>}
      {error && <ErrorNotice message={error} retry={() => reload()} />}
      {items === undefined && loading && <Loading what="artifacts" />}
      {items !== undefined && items.length === 0 && (
        <Empty title={keyId ? "This key has no artifacts" : "No artifacts yet"}>
          Artifacts are uploaded with <code>POST /v1/artifacts</code>{operator ? " by a key that has the artifacts surface" : " using this key"}; they appear here once stored.
        </Empty>
      )}
      {items !== undefined && items.length > 0 && (
        <TableScroll label="Artifacts">
          <table class="striped">
            <thead>
              <tr>
                <th>Artifact</th>{operator && <th>Key</th>}<th>Shape</th><th class="num">Rows</th><th class="num">Size</th>
                <th>Type</th><th class="num">Versions</th><th>Created</th>
              </tr>
            </thead>
            <tbody>
              {items.map((a) => (
                <tr data-artifact-id={a.id}>
                  <td class="mono">
                    <a href={`/dashboard/artifacts/${a.id}`} onClick={onLinkClick}>{a.id}</a>
                    {a.summary && <div><small class="muted summary" title={a.summary}>{a.summary}</small></div>}
                  </td>
                  {operator && <td>{a.key.name ?? <span class="muted">unnamed</span>} <small class="muted mono">{a.key.hint ?? a.keyId}</small></td>}
                  <td><ShapeBadge kind={a.kind} /> <small class="muted">{a.format}</small></td>
                  <td class="num">{a.rowCount === null ? <span class="muted">—</span> : int(a.rowCount)}</td>
                  <td class="num">{bytes(a.sizeBytes)}</td>
                  <td class="mono">{a.mimeType}</td>
                  <td class="num" title={`head is version ${a.headVersion}`}>{int(a.versionCount)}</td>
                  <td>{dateTime(a.createdAt)}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </TableScroll>
      )}
      {cursor && <button type="button" class="outline" aria-busy={loading} onClick={() => more()}>Load older artifacts</button>}
    </>
  )
}
