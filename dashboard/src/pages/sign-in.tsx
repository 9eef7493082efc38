/** Sign-in with the admin token (operators) or an `svc_` key (key holders). */
import { useState } from "preact/hooks"
import { api, messageOf, type Session } from "../api.ts"
import { ErrorNotice } from "../components.tsx"

export const SignIn = ({ reason, onSignedIn }: { reason: string | undefined; onSignedIn: (session: Session) => void }) => {
  const [token, setToken] = useState("")
  const [busy, setBusy] = useState(false)
  const [error, setError] = useState<string>()
  const submit = async (event: Event) => {
    event.preventDefault()
    setBusy(true)
    setError(undefined)
    try {
      onSignedIn(await api<Session>("/session", { method: "POST", body: { token }, quiet401: true }))
    } catch (e) {
      setError(messageOf(e))
      setBusy(false)
    }
  }
  return (
    <main class="container sign-in">
      <article>
        <header>
          <h1>svc-gateway</h1>
          <p class="muted">Sign in to the dashboard</p>
        </header>
        {reason && !error && <p class="notice notice-info" role="status">{reason}</p>}
        <form onSubmit={submit}>
          <label>
            Admin token or API key
            <input
              type="password"
              name="token"
              autocomplete="off"
              required
              value={token}
              onInput={(e) => setToken((e.target as HTMLInputElement).value)}
              aria-invalid={error ? "true" : undefined}
              aria-describedby="token-help"
            />
          </label>
          <small id="token-help">
            Operators: the admin token (<code>GATEWAY_ADMIN_TOKEN</code>, or <code>.data/admin-token</code>).
            Key holders: your <code>svc_…</code> key, to see its own usage, limits and runs.
          </small>
          {error && <ErrorNotice message={error} />}
          <button type="submit" aria-busy={busy} disabled={busy || token.trim() === ""}>Sign in</button>
        </form>
        <footer><small class="muted">The token is sent once; the browser keeps only a session cookie.</small></footer>
      </article>
    </main>
  )
}
