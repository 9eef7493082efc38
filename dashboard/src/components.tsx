/** Small building blocks every page uses: loading, errors, empty states, badges, dialogs. */
import type { ComponentChildren } from "preact"
import { useCallback, useEffect, useRef, useState } from "preact/hooks"
import { type AllowanceView, api, type KeyView, messageOf } from "./api.ts"
import { usd } from "./format.ts"

/** Loads data on mount (and on `deps` changes); `reload` fetches again, keeping what is shown. */
export const useLoad = <T,>(load: () => Promise<T>, deps: ReadonlyArray<unknown> = []) => {
  const [state, setState] = useState<{ data?: T; error?: string; loading: boolean }>({ loading: true })
  const generation = useRef(0)
  const reload = useCallback(() => {
    const mine = ++generation.current
    setState((s) => ({ ...s, loading: true }))
    load().then(
      (data) => mine === generation.current && setState({ data, loading: false }),
      (error) => mine === generation.current && setState((s) => ({ data: s.data, error: messageOf(error), loading: false }))
    )
  }, deps)
  useEffect(reload, [reload])
  return { ...state, reload }
}

export const Loading = ({ what }: { what: string }) => (
  <p class="loading" aria-busy="true">Loading {what}…</p>
)

export const ErrorNotice = ({ message, retry }: { message: string; retry?: () => void }) => (
  <div class="notice notice-error" role="alert">
    <p>{message}</p>
    {retry && <button type="button" class="outline secondary" onClick={retry}>Try again</button>}
  </div>
)

export const Empty = ({ title, children }: { title: string; children?: ComponentChildren }) => (
  <div class="empty">
    <strong>{title}</strong>
    {children && <p>{children}</p>}
  </div>
)

export type Tone = "good" | "warn" | "bad" | "info" | "muted"

export const Badge = ({ tone, children }: { tone: Tone; children: ComponentChildren }) => (
  <span class={`badge badge-${tone}`}>{children}</span>
)

const RUN_TONES: Record<string, Tone> = {
  running: "info", requires_action: "warn", completed: "good", failed: "bad", cancelled: "muted", incomplete: "warn"
}
export const RunStatus = ({ status }: { status: string }) => <Badge tone={RUN_TONES[status] ?? "muted"}>{status.replace("_", " ")}</Badge>

export const PageHeader = ({ title, children }: { title: string; children?: ComponentChildren }) => (
  <header class="page-header">
    <h1>{title}</h1>
    {children && <div class="page-actions">{children}</div>}
  </header>
)

/** Pico draws a dialog's close button from `rel="prev"` (not a button attribute in the DOM types). */
const PICO_CLOSE = { rel: "prev" } as Record<string, string>

/** A modal dialog (Pico's `<dialog>`); Escape and the backdrop close it. */
export const Modal = ({ title, onClose, children, footer }: {
  title: string
  onClose: () => void
  children: ComponentChildren
  footer?: ComponentChildren
}) => {
  const ref = useRef<HTMLDialogElement>(null)
  useEffect(() => {
    const dialog = ref.current!
    if (!dialog.open) dialog.showModal()
    const onCancel = (event: Event) => {
      event.preventDefault()
      onClose()
    }
    dialog.addEventListener("cancel", onCancel)
    return () => dialog.removeEventListener("cancel", onCancel)
  }, [onClose])
  return (
    <dialog ref={ref} onClick={(event) => event.target === ref.current && onClose()}>
      <article>
        <header>
          <button type="button" aria-label="Close" {...PICO_CLOSE} onClick={onClose} />
          <h3>{title}</h3>
        </header>
        {children}
        {footer && <footer>{footer}</footer>}
      </article>
    </dialog>
  )
}

/** Asks before doing something that cannot be undone; shows the action's error in place. */
export const Confirm = ({ title, children, action, danger, onConfirm, onClose }: {
  title: string
  children: ComponentChildren
  action: string
  danger?: boolean
  onConfirm: () => Promise<void>
  onClose: () => void
}) => {
  const [busy, setBusy] = useState(false)
  const [error, setError] = useState<string>()
  const confirm = async () => {
    setBusy(true)
    setError(undefined)
    try {
      await onConfirm()
      onClose()
    } catch (e) {
      setError(messageOf(e))
      setBusy(false)
    }
  }
  return (
    <Modal title={title} onClose={onClose} footer={
      <>
        <button type="button" class="secondary outline" onClick={onClose} disabled={busy}>Cancel</button>
        <button type="button" class={danger ? "danger" : ""} aria-busy={busy} disabled={busy} onClick={confirm}>{action}</button>
      </>
    }>
      {children}
      {error && <ErrorNotice message={error} />}
    </Modal>
  )
}

export const CopyButton = ({ text, label = "Copy" }: { text: string; label?: string }) => {
  const [state, setState] = useState<"idle" | "copied" | "failed">("idle")
  const copy = async () => {
    try {
      await navigator.clipboard.writeText(text)
      setState("copied")
    } catch {
      setState("failed")
    }
    setTimeout(() => setState("idle"), 2000)
  }
  return (
    <button type="button" class="copy" onClick={copy}>
      {state === "copied" ? "Copied ✓" : state === "failed" ? "Select and copy by hand" : label}
    </button>
  )
}

/** Allowance as a bar plus words: used of the month's cap, or a prepaid balance. */
export const AllowanceBar = ({ allowance }: { allowance: AllowanceView | null | undefined }) => {
  if (allowance === null || allowance === undefined) return <span class="muted">—</span>
  if (allowance.kind === "credits") {
    return <span>{usd(allowance.remainingUsd)} <span class="muted">credit left</span></span>
  }
  const limit = Number(allowance.limitUsd)
  const used = Number(allowance.usedUsd)
  const share = limit > 0 ? used / limit : 1
  return (
    <div class="allowance">
      <progress value={used} max={limit > 0 ? limit : 1} class={share >= 0.9 ? "over" : ""} />
      <small>{usd(allowance.remainingUsd)} left of {usd(limit)}</small>
    </div>
  )
}

export const TableScroll = ({ children, label }: { children: ComponentChildren; label: string }) => (
  <div class="table-scroll" role="region" aria-label={label} tabIndex={0}>{children}</div>
)

/** The operator's key filter of the list pages: every key, revoked ones too (their items stay). */
export const KeyFilter = ({ value, onChange }: { value: string; onChange: (keyId: string) => void }) => {
  const keys = useLoad(() => api<{ data: ReadonlyArray<KeyView> }>("/keys"))
  return (
    <select aria-label="Key" value={value} onChange={(e) => onChange((e.target as HTMLSelectElement).value)}>
      <option value="">Every key</option>
      {(keys.data?.data ?? []).map((k) => (
        <option value={k.id}>{k.name ?? "unnamed"} · {k.hint}{k.revoked ? " (revoked)" : ""}</option>
      ))}
    </select>
  )
}
