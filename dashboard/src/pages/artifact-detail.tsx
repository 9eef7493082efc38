/**
 * One artifact: its descriptor (of the head, or of a chosen version), its versions, and a query
 * form. The form builds the artifact API's own query body (filter, sort, search, limit for a
 * table; a byte range for text) and shows the answer: rows as a table, or the text.
 */
import { useState } from "preact/hooks"
import { api, type ArtifactDetail, type ArtifactQueryResult, type ArtifactShape, messageOf, type Session } from "../api.ts"
import { Empty, ErrorNotice, Loading, PageHeader, TableScroll, useLoad } from "../components.tsx"
import { bytes, dateTime, int } from "../format.ts"
import { onLinkClick } from "../router.ts"
import { ShapeBadge } from "./artifacts.tsx"

const OPS = ["eq", "ne", "lt", "lte", "gt", "gte", "contains", "in", "exists"] as const
type Op = typeof OPS[number]
interface FilterRow { readonly field: string; readonly op: Op; readonly value: string }

/** What a typed value means: `in` takes comma-separated values, `exists` yes/no; others as typed (the service converts to the column's type). */
const filterValue = (row: FilterRow): unknown =>
  row.op === "in" ? row.value.split(",").map((s) => s.trim()).filter((s) => s !== "")
  : row.op === "exists" ? row.value !== "false"
  : row.value === "null" ? null
  : row.value

const cell = (value: unknown) =>
  value === undefined ? <span class="muted">—</span>
  : value === null ? <span class="muted">null</span>
  : typeof value === "object" ? <code>{JSON.stringify(value)}</code>
  : String(value)

/** Columns in the order rows list them (the descriptor's column order). */
const columnsOf = (rows: ReadonlyArray<Record<string, unknown>>) => {
  const seen = new Set<string>()
  for (const row of rows) for (const k of Object.keys(row)) seen.add(k)
  return [...seen]
}

const ResultView = ({ answer }: { answer: ArtifactQueryResult["result"] }) => {
  if (!answer.structured) {
    return (
      <>
        <p class="muted" data-testid="query-summary">
          Bytes {int(answer.range?.byteStart ?? 0)}–{int(answer.range?.byteEnd ?? 0)} of version {answer.version}
          {answer.truncated ? " (cut: ask for a later byte range for the rest)" : ""}
        </p>
        <pre class="artifact-text">{answer.text}</pre>
      </>
    )
  }
  const rows = answer.rows ?? []
  const columns = columnsOf(rows)
  return (
    <>
      <p class="muted" data-testid="query-summary">
        {int(rows.length)} of {int(answer.totalMatched)} matching rows (version {answer.version})
        {answer.truncated ? "; raise the limit or narrow the filter to see the rest" : ""}
      </p>
      {rows.length === 0
        ? <Empty title="No rows match">Change or remove a filter, or clear the search.</Empty>
        : (
          <TableScroll label="Query result">
            <table class="striped query-result">
              <thead><tr>{columns.map((c) => <th>{c}</th>)}</tr></thead>
              <tbody>{rows.map((row) => <tr>{columns.map((c) => <td class={typeof row[c] === "number" ? "num" : ""}>{cell(row[c])}</td>)}</tr>)}</tbody>
            </table>
          </TableScroll>
        )}
    </>
  )
}

const QueryForm = ({ artifactId, version, shape }: { artifactId: string; version: number; shape: ArtifactShape }) => {
  const table = shape.kind === "table"
  const columns = shape.kind === "table" ? shape.columns.map((c) => c.name) : []
  const [filters, setFilters] = useState<ReadonlyArray<FilterRow>>([])
  const [sortField, setSortField] = useState("")
  const [sortDir, setSortDir] = useState<"asc" | "desc">("asc")
  const [search, setSearch] = useState("")
  const [limit, setLimit] = useState("25")
  const [byteStart, setByteStart] = useState("0")
  const [byteEnd, setByteEnd] = useState("4096")
  const [answer, setAnswer] = useState<ArtifactQueryResult["result"]>()
  const [busy, setBusy] = useState(false)
  const [error, setError] = useState<string>()

  const run = async (event: Event) => {
    event.preventDefault()
    setBusy(true)
    setError(undefined)
    const body: Record<string, unknown> = { version }
    if (table) {
      const used = filters.filter((f) => f.field !== "")
      if (used.length > 0) body.filter = used.map((f) => ({ field: f.field, op: f.op, value: filterValue(f) }))
      if (sortField !== "") body.sort = [{ field: sortField, dir: sortDir }]
      if (search.trim() !== "") body.search = search.trim()
      body.limit = limit === "" ? 25 : Number(limit)
    } else {
      body.range = { byteStart: byteStart === "" ? 0 : Number(byteStart), ...(byteEnd === "" ? {} : { byteEnd: Number(byteEnd) }) }
    }
    try {
      setAnswer((await api<ArtifactQueryResult>(`/artifacts/${encodeURIComponent(artifactId)}/query`, { method: "POST", body })).result)
    } catch (e) {
      setError(messageOf(e))
    }
    setBusy(false)
  }
  const setFilter = (i: number, change: Partial<FilterRow>) =>
    setFilters((old) => old.map((f, j) => (j === i ? { ...f, ...change } : f)))
  const input = (set: (v: string) => void) => (e: Event) => set((e.target as HTMLInputElement).value)

  return (
    <section class="artifact-query">
      <h2>Query</h2>
      <form onSubmit={run}>
        {table
          ? (
            <>
              {filters.map((f, i) => (
                <div class="filter-row" data-testid="filter-row">
                  <select aria-label="Filter field" value={f.field} onChange={(e) => setFilter(i, { field: (e.target as HTMLSelectElement).value })}>
                    <option value="">field…</option>
                    {columns.map((c) => <option value={c}>{c}</option>)}
                  </select>
                  <select aria-label="Filter operator" value={f.op} onChange={(e) => setFilter(i, { op: (e.target as HTMLSelectElement).value as Op })}>
                    {OPS.map((op) => <option value={op}>{op}</option>)}
                  </select>
                  <input aria-label="Filter value" value={f.value} onInput={(e) => setFilter(i, { value: (e.target as HTMLInputElement).value })}
                    placeholder={f.op === "in" ? "a, b, c" : f.op === "exists" ? "true or false" : "value"} />
                  <button type="button" class="outline secondary small" aria-label="Remove filter"
                    onClick={() => setFilters((old) => old.filter((_, j) => j !== i))}>✕</button>
                </div>
              ))}
              <button type="button" class="outline secondary small" onClick={() => setFilters((old) => [...old, { field: columns[0] ?? "", op: "eq", value: "" }])}>
                Add filter
              </button>
              <div class="query-options">
                <label>
                  Sort by
                  <select name="sort" value={sortField} onChange={(e) => setSortField((e.target as HTMLSelectElement).value)}>
                    <option value="">upload order</option>
                    {columns.map((c) => <option value={c}>{c}</option>)}
                  </select>
                </label>
                <label>
                  Direction
                  <select name="dir" value={sortDir} onChange={(e) => setSortDir((e.target as HTMLSelectElement).value as "asc" | "desc")}>
                    <option value="asc">ascending</option>
                    <option value="desc">descending</option>
                  </select>
                </label>
                <label>
                  Search
                  <input name="search" value={search} onInput={input(setSearch)} placeholder="any text in a row" />
                </label>
                <label>
                  Limit
                  <input name="limit" type="number" min={0} value={limit} onInput={input(setLimit)} />
                </label>
              </div>
            </>
          )
          : (
            <div class="query-options">
              <label>
                From byte
                <input name="byteStart" type="number" min={0} value={byteStart} onInput={input(setByteStart)} />
              </label>
              <label>
                To byte (exclusive)
                <input name="byteEnd" type="number" min={0} value={byteEnd} onInput={input(setByteEnd)} placeholder="end of text" />
              </label>
            </div>
          )}
        <button type="submit" aria-busy={busy} disabled={busy}>Run query</button>
      </form>
      {error && <ErrorNotice message={error} />}
      {answer && <ResultView answer={answer} />}
    </section>
  )
}

const shapeText = (shape: ArtifactShape) =>
  shape.kind === "table"
    ? `${int(shape.rowCount)} rows × ${int(shape.columnCount)} columns${shape.rowsPath ? ` (rows at “${shape.rowsPath}”)` : ""}`
    : `${int(shape.characters)} characters, ${int(shape.lines)} lines`

export const ArtifactDetailPage = ({ artifactId, session }: { artifactId: string; session: Session }) => {
  const [version, setVersion] = useState<number>()
  const detail = useLoad(
    () => api<ArtifactDetail>(`/artifacts/${encodeURIComponent(artifactId)}${version === undefined ? "" : `?version=${version}`}`),
    [artifactId, version]
  )
  const d = detail.data?.descriptor
  return (
    <>
      <p><a href="/dashboard/artifacts" onClick={onLinkClick}>← Artifacts</a></p>
      <PageHeader title={`Artifact ${artifactId}`} />
      {detail.error && <ErrorNotice message={detail.error} retry={detail.reload} />}
      {d === undefined && detail.loading && <Loading what="the artifact" />}
      {d && (
        <>
          <article class="run-record artifact-record">
            <dl>
              <div><dt>Version</dt><dd>{d.version} of {d.headVersion}{d.version === d.headVersion ? " (head)" : ""}</dd></div>
              <div><dt>Shape</dt><dd><ShapeBadge kind={d.shape.kind} /> {shapeText(d.shape)}</dd></div>
              <div><dt>Format</dt><dd>{d.format} <small class="muted mono">{d.mimeType}</small></dd></div>
              <div><dt>Size</dt><dd>{bytes(d.sizeBytes)}</dd></div>
              {session.role === "operator" && (
                <div><dt>Key</dt><dd>{detail.data!.key.name ?? <span class="muted">unnamed</span>} <small class="muted mono">{detail.data!.key.hint ?? detail.data!.keyId}</small></dd></div>
              )}
              <div><dt>Source</dt><dd class="mono">{d.source}</dd></div>
              <div><dt>Provenance</dt><dd>{d.provenance.method}{d.provenance.lossless ? ", lossless" : ""}</dd></div>
              {d.declaredRowCount !== null && <div><dt>Declared rows</dt><dd>{int(d.declaredRowCount)}</dd></div>}
              <div><dt>Created</dt><dd>{dateTime(d.createdAt)}</dd></div>
              <div class="wide"><dt>Content hash</dt><dd class="mono hash">{d.contentHash}</dd></div>
              {d.summary && <div class="wide"><dt>Summary</dt><dd>{d.summary}</dd></div>}
            </dl>
          </article>
          {d.shape.kind === "table" && d.shape.columns.length > 0 && (
            <details>
              <summary>Columns ({int(d.shape.columnCount)})</summary>
              <p>{d.shape.columns.map((c) => <span class="chip">{c.name} <span class="muted">{c.type}</span></span>)}</p>
            </details>
          )}
          <h2>Versions</h2>
          <TableScroll label="Versions">
            <table class="striped">
              <thead><tr><th>Version</th><th class="num">Size</th><th>Content hash</th><th>Created</th><th /></tr></thead>
              <tbody>
                {d.versions.map((v) => (
                  <tr data-version={v.version} class={v.version === d.version ? "current" : ""}>
                    <td>{v.version}{v.version === d.headVersion ? <small class="muted"> head</small> : ""}</td>
                    <td class="num">{bytes(v.sizeBytes)}</td>
                    <td class="mono" title={v.contentHash}>{v.contentHash.slice(0, 19)}…</td>
                    <td>{dateTime(v.createdAt)}</td>
                    <td class="actions">
                      {v.version === d.version
                        ? <small class="muted">shown</small>
                        : <button type="button" class="outline secondary small" onClick={() => setVersion(v.version)}>Show</button>}
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          </TableScroll>
          {d.versionCount > d.versions.length && <p class="muted">The newest {int(d.versions.length)} of {int(d.versionCount)} versions are listed.</p>}
          <QueryForm key={`${d.artifactId}@${d.version}`} artifactId={d.artifactId} version={d.version} shape={d.shape} />
        </>
      )}
    </>
  )
}
