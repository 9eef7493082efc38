/** Operators: create keys (secret shown once), see their plan, status and allowance, change, top up, revoke. */
import { useState } from "preact/hooks"
import { api, type KeyView, messageOf, type PlanView } from "../api.ts"
import { AllowanceBar, Badge, Confirm, CopyButton, Empty, ErrorNotice, Loading, Modal, PageHeader, TableScroll, useLoad } from "../components.tsx"
import { date } from "../format.ts"

interface KeysList {
  readonly data: ReadonlyArray<KeyView>
  readonly plans: ReadonlyArray<PlanView>
  readonly defaultPlan: string
  readonly surfaces: ReadonlyArray<string>
}

interface Created { readonly id: string; readonly key: string; readonly name: string | null; readonly hint: string }

const parsePatterns = (text: string) => text.split(/[\s,]+/).map((s) => s.trim()).filter((s) => s !== "")

const CreateKey = ({ list, onCreated }: { list: KeysList; onCreated: (created: Created) => void }) => {
  const [name, setName] = useState("")
  const [plan, setPlan] = useState(list.defaultPlan)
  const [allSurfaces, setAllSurfaces] = useState(true)
  const [surfaces, setSurfaces] = useState<ReadonlyArray<string>>([])
  const [models, setModels] = useState("")
  const [busy, setBusy] = useState(false)
  const [error, setError] = useState<string>()
  const submit = async (event: Event) => {
    event.preventDefault()
    setBusy(true)
    setError(undefined)
    try {
      const patterns = parsePatterns(models)
      const created = await api<Created>("/keys", {
        method: "POST",
        body: {
          name: name.trim() === "" ? null : name.trim(),
          plan,
          permissions: { surfaces: allSurfaces ? null : surfaces, models: patterns.length === 0 ? null : patterns }
        }
      })
      setName("")
      setModels("")
      onCreated(created)
    } catch (e) {
      setError(messageOf(e))
    }
    setBusy(false)
  }
  const toggle = (surface: string) =>
    setSurfaces((s) => (s.includes(surface) ? s.filter((x) => x !== surface) : [...s, surface]))
  return (
    <details class="create-key" open={list.data.length <= 1}>
      <summary role="button" class="outline">Create a key</summary>
      <form onSubmit={submit}>
        <div class="grid">
          <label>
            Name
            <input name="name" placeholder="e.g. billing-service" maxLength={200} value={name}
              onInput={(e) => setName((e.target as HTMLInputElement).value)} />
          </label>
          <label>
            Plan
            <select name="plan" value={plan} onChange={(e) => setPlan((e.target as HTMLSelectElement).value)}>
              {list.plans.map((p) => (
                <option value={p.name}>{p.name} — {p.prepaid ? "prepaid credits" : `$${p.allowanceUsd}/month`}, {p.rpm} rpm</option>
              ))}
            </select>
          </label>
        </div>
        <fieldset>
          <legend>Surfaces</legend>
          <label>
            <input type="checkbox" role="switch" name="all-surfaces" checked={allSurfaces}
              onChange={(e) => setAllSurfaces((e.target as HTMLInputElement).checked)} />
            Every surface
          </label>
          {!allSurfaces && (
            <div class="checks">
              {list.surfaces.map((surface) => (
                <label>
                  <input type="checkbox" name={`surface-${surface}`} checked={surfaces.includes(surface)} onChange={() => toggle(surface)} />
                  {surface}
                </label>
              ))}
            </div>
          )}
        </fieldset>
        <label>
          Model patterns
          <input name="models" placeholder="every model — or e.g. svc-nova-*, svc-pico-1" value={models}
            onInput={(e) => setModels((e.target as HTMLInputElement).value)} aria-describedby="models-help" />
          <small id="models-help">Comma-separated canonical ids; <code>*</code> matches anything. Leave empty for every model.</small>
        </label>
        {error && <ErrorNotice message={error} />}
        <button type="submit" aria-busy={busy} disabled={busy || (!allSurfaces && surfaces.length === 0)}>Create key</button>
      </form>
    </details>
  )
}

const SecretOnce = ({ created, onClose }: { created: Created; onClose: () => void }) => (
  <Modal title="Store this key now" onClose={onClose} footer={<button type="button" onClick={onClose}>I have stored it</button>}>
    <p>
      This is the only time the secret of <strong>{created.name ?? created.id}</strong> is shown. The gateway keeps
      only a hash of it: if it is lost, revoke the key and create a new one.
    </p>
    <div class="secret">
      <input readOnly value={created.key} aria-label="API key secret" data-testid="new-key-secret"
        onFocus={(e) => (e.target as HTMLInputElement).select()} />
      <CopyButton text={created.key} />
    </div>
  </Modal>
)

const ChangePlan = ({ keyView, plans, onDone, onClose }: { keyView: KeyView; plans: ReadonlyArray<PlanView>; onDone: () => void; onClose: () => void }) => {
  const [plan, setPlan] = useState(keyView.plan)
  return (
    <Confirm title={`Plan of ${keyView.name ?? keyView.hint}`} action="Save plan" onClose={onClose}
      onConfirm={async () => {
        await api(`/keys/${keyView.id}`, { method: "PATCH", body: { plan } })
        onDone()
      }}>
      <label>
        Plan
        <select name="plan" value={plan} onChange={(e) => setPlan((e.target as HTMLSelectElement).value)}>
          {plans.map((p) => <option value={p.name}>{p.name} — {p.prepaid ? "prepaid credits" : `$${p.allowanceUsd}/month`}, {p.rpm} rpm, {p.concurrency} concurrent</option>)}
        </select>
      </label>
      <small class="muted">A bigger allowance applies to the key's next call.</small>
    </Confirm>
  )
}

const AddCredits = ({ keyView, prepaid, onDone, onClose }: { keyView: KeyView; prepaid: boolean; onDone: () => void; onClose: () => void }) => {
  const [amount, setAmount] = useState("10")
  return (
    <Confirm title={`Add credits to ${keyView.name ?? keyView.hint}`} action="Add credits" onClose={onClose}
      onConfirm={async () => {
        await api(`/keys/${keyView.id}/credits`, { method: "POST", body: { amountUsd: Number(amount) } })
        onDone()
      }}>
      <label>
        Amount (USD)
        <input type="number" name="amount" min="0.01" step="0.01" value={amount} onInput={(e) => setAmount((e.target as HTMLInputElement).value)} />
      </label>
      {!prepaid && <small class="muted">This key's plan ({keyView.plan}) draws on a monthly allowance: credits are used once it moves to a prepaid plan.</small>}
    </Confirm>
  )
}

type Action = { kind: "plan" | "credits" | "revoke"; key: KeyView }

export const KeysPage = () => {
  const keys = useLoad(() => api<KeysList>("/keys"))
  const [created, setCreated] = useState<Created>()
  const [action, setAction] = useState<Action>()
  const close = () => setAction(undefined)
  const list = keys.data
  const active = list?.data.filter((k) => !k.revoked) ?? []
  const revoked = list?.data.filter((k) => k.revoked) ?? []
  return (
    <>
      <PageHeader title="Keys">
        <button type="button" class="outline secondary" onClick={keys.reload} aria-busy={keys.loading}>Refresh</button>
      </PageHeader>
      {list === undefined && keys.loading && <Loading what="keys" />}
      {keys.error && <ErrorNotice message={keys.error} retry={keys.reload} />}
      {list && (
        <>
          <CreateKey list={list} onCreated={(c) => {
            setCreated(c)
            keys.reload()
          }} />
          {list.data.length === 0
            ? <Empty title="No keys yet">Create one above; its secret is shown once.</Empty>
            : (
              <TableScroll label="API keys">
                <table class="striped">
                  <thead>
                    <tr><th>Name</th><th>Key</th><th>Plan</th><th>Status</th><th>Allowance</th><th>Created</th><th><span class="visually-hidden">Actions</span></th></tr>
                  </thead>
                  <tbody>
                    {[...active, ...revoked].map((k) => {
                      const plan = list.plans.find((p) => p.name === k.plan)
                      return (
                        <tr data-key-id={k.id} class={k.revoked ? "muted-row" : ""}>
                          <td>{k.name ?? <span class="muted">unnamed</span>}<br /><small class="muted mono">{k.id}</small></td>
                          <td class="mono">{k.hint}</td>
                          <td>{k.plan}</td>
                          <td>{k.revoked ? <Badge tone="muted">revoked</Badge> : <Badge tone="good">active</Badge>}</td>
                          <td>{k.revoked ? <span class="muted">—</span> : <AllowanceBar allowance={k.allowance} />}</td>
                          <td>{date(k.createdAt)}</td>
                          <td class="actions">
                            {!k.revoked && (
                              <>
                                <button type="button" class="outline secondary small" onClick={() => setAction({ kind: "plan", key: k })}>Plan</button>
                                <button type="button" class="outline secondary small" onClick={() => setAction({ kind: "credits", key: k })} title={plan?.prepaid === true ? "Top up the prepaid balance" : "Credits are used by prepaid plans"}>Credits</button>
                                <button type="button" class="outline danger small" onClick={() => setAction({ kind: "revoke", key: k })}>Revoke</button>
                              </>
                            )}
                          </td>
                        </tr>
                      )
                    })}
                  </tbody>
                </table>
              </TableScroll>
            )}
        </>
      )}
      {created && <SecretOnce created={created} onClose={() => setCreated(undefined)} />}
      {action?.kind === "plan" && list && <ChangePlan keyView={action.key} plans={list.plans} onDone={keys.reload} onClose={close} />}
      {action?.kind === "credits" && list && (
        <AddCredits keyView={action.key} prepaid={list.plans.find((p) => p.name === action.key.plan)?.prepaid === true} onDone={keys.reload} onClose={close} />
      )}
      {action?.kind === "revoke" && (
        <Confirm title="Revoke this key?" action="Revoke key" danger onClose={close}
          onConfirm={async () => {
            await api(`/keys/${action.key.id}`, { method: "DELETE" })
            keys.reload()
          }}>
          <p>
            <strong>{action.key.name ?? "unnamed"}</strong> (<span class="mono">{action.key.hint}</span>) stops working at once:
            every program using it gets <code>401</code>. This cannot be undone.
          </p>
        </Confirm>
      )}
    </>
  )
}
