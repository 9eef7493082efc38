/** The catalog as users see it (`GET /v1/models`), with list prices per million tokens. */
import { api, type ModelView, type Session } from "../api.ts"
import { Badge, Empty, ErrorNotice, Loading, PageHeader, TableScroll, useLoad } from "../components.tsx"
import { int } from "../format.ts"

const price = (n: number | null) => (n === null ? <span class="muted">—</span> : `$${n}`)

export const ModelsPage = ({ session }: { session: Session }) => {
  const models = useLoad(() => api<{ data: ReadonlyArray<ModelView> }>("/models"))
  const chat = models.data?.data.filter((m) => m.kind === "chat") ?? []
  const embedding = models.data?.data.filter((m) => m.kind === "embedding") ?? []
  const keyHolder = session.role === "key"
  return (
    <>
      <PageHeader title="Models" />
      {models.error && <ErrorNotice message={models.error} retry={models.reload} />}
      {models.data === undefined && models.loading && <Loading what="the catalog" />}
      {models.data && models.data.data.length === 0 && <Empty title="The catalog is empty">Add models to the config file (<code>GATEWAY_CONFIG</code>).</Empty>}
      {chat.length > 0 && (
        <article>
          <header>Chat models <small class="muted">· USD per million tokens, list price</small></header>
          <TableScroll label="Chat models">
            <table class="striped">
              <thead>
                <tr><th>Model</th><th>Tier</th><th>Capabilities</th><th class="num">Context</th><th class="num">Max output</th><th class="num">Input</th><th class="num">Cached input</th><th class="num">Output</th></tr>
              </thead>
              <tbody>
                {chat.map((m) => (
                  <tr class={m.allowed ? "" : "muted-row"} data-model={m.id}>
                    <td>
                      <span class="mono">{m.id}</span>{keyHolder && !m.allowed && <> <Badge tone="muted">not for this key</Badge></>}
                      <br /><small class="muted">{m.display_name}{m.aliases.length > 0 ? ` · alias ${m.aliases.join(", ")}` : ""}</small>
                    </td>
                    <td>{m.tier}</td>
                    <td class="caps">
                      {(["tools", "reasoning", "vision", "documents"] as const).filter((c) => m.capabilities[c]).map((c) => <span class="chip">{c}</span>)}
                    </td>
                    <td class="num">{int(m.context_window)}</td>
                    <td class="num">{m.max_output === null ? <span class="muted">—</span> : int(m.max_output)}</td>
                    <td class="num">{price(m.pricing_usd_per_mtok.input)}</td>
                    <td class="num">{price(m.pricing_usd_per_mtok.cached_input)}</td>
                    <td class="num">{price(m.pricing_usd_per_mtok.output)}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          </TableScroll>
        </article>
      )}
      {embedding.length > 0 && (
        <article>
          <header>Embedding models</header>
          <TableScroll label="Embedding models">
            <table class="striped">
              <thead><tr><th>Model</th><th class="num">Dimensions</th><th class="num">Max input</th><th class="num">Input</th></tr></thead>
              <tbody>
                {embedding.map((m) => (
                  <tr class={m.allowed ? "" : "muted-row"} data-model={m.id}>
                    <td><span class="mono">{m.id}</span><br /><small class="muted">{m.display_name}</small></td>
                    <td class="num">{m.dimensions ?? "—"}</td>
                    <td class="num">{int(m.context_window)}</td>
                    <td class="num">{price(m.pricing_usd_per_mtok.input)}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          </TableScroll>
        </article>
      )}
    </>
  )
}
