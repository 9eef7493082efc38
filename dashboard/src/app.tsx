/**
 * The app shell: reads the session, shows sign-in or the pages the session may see, and the
 * navigation. Pages are listed once in `PAGES`; a page with `feature` shows only when the gateway
 * serves that surface (the extension point for artifacts and batches).
 */
import type { ComponentChildren } from "preact"
import { useCallback, useEffect, useState } from "preact/hooks"
import { api, ApiError, configureApi, messageOf, type Session } from "./api.ts"
import { ErrorNotice, Loading } from "./components.tsx"
import { ArtifactDetailPage } from "./pages/artifact-detail.tsx"
import { ArtifactsPage } from "./pages/artifacts.tsx"
import { BatchDetailPage } from "./pages/batch-detail.tsx"
import { BatchesPage } from "./pages/batches.tsx"
import { NotFoundPage } from "./pages/extension.tsx"
import { KeysPage } from "./pages/keys.tsx"
import { ModelsPage } from "./pages/models.tsx"
import { MyKeyPage } from "./pages/my-key.tsx"
import { QueuesPage } from "./pages/queues.tsx"
import { RunDetailPage } from "./pages/run-detail.tsx"
import { RunsPage } from "./pages/runs.tsx"
import { SignIn } from "./pages/sign-in.tsx"
import { UsagePage } from "./pages/usage.tsx"
import { navigate, onLinkClick, usePath } from "./router.ts"

interface PageProps {
  readonly session: Session
  readonly signedOut: (reason: string) => void
}

interface PageDef {
  readonly slug: string
  readonly title: string
  readonly roles: ReadonlyArray<Session["role"]>
  readonly feature?: keyof Session["features"]
  readonly render: (props: PageProps) => ComponentChildren
}

const PAGES: ReadonlyArray<PageDef> = [
  { slug: "my-key", title: "My key", roles: ["key"], render: () => <MyKeyPage /> },
  { slug: "keys", title: "Keys", roles: ["operator"], render: () => <KeysPage /> },
  { slug: "usage", title: "Usage", roles: ["operator", "key"], render: ({ session }) => <UsagePage session={session} /> },
  { slug: "queues", title: "Queues", roles: ["operator"], render: ({ signedOut }) => <QueuesPage onSignedOut={signedOut} /> },
  { slug: "runs", title: "Runs", roles: ["operator", "key"], render: ({ session }) => <RunsPage session={session} /> },
  { slug: "models", title: "Models", roles: ["operator", "key"], render: ({ session }) => <ModelsPage session={session} /> },
  { slug: "artifacts", title: "Artifacts", roles: ["operator", "key"], feature: "artifacts", render: ({ session }) => <ArtifactsPage session={session} /> },
  { slug: "batches", title: "Batches", roles: ["operator", "key"], feature: "batches", render: ({ session }) => <BatchesPage session={session} /> }
]

const pagesFor = (session: Session) =>
  PAGES.filter((page) => page.roles.includes(session.role) && (page.feature === undefined || session.features[page.feature]))

const Nav = ({ session, current, onSignOut }: { session: Session; current: string; onSignOut: () => void }) => (
  <header class="topbar">
    <nav class="container-fluid">
      <ul>
        <li><a href="/dashboard" class="brand" onClick={onLinkClick}><strong>svc-gateway</strong></a></li>
      </ul>
      <ul class="nav-pages">
        {pagesFor(session).map((page) => (
          <li>
            <a href={`/dashboard/${page.slug}`} onClick={onLinkClick} aria-current={current === page.slug ? "page" : undefined}>{page.title}</a>
          </li>
        ))}
      </ul>
      <ul class="nav-session">
        <li>
          <small class="who" title={session.role === "operator" ? "Signed in with the admin token" : `Signed in with ${session.key?.hint}`}>
            {session.role === "operator" ? "operator" : (session.key?.name ?? session.key?.hint)}
          </small>
        </li>
        <li><button type="button" class="outline secondary small" onClick={onSignOut}>Sign out</button></li>
      </ul>
    </nav>
  </header>
)

export const App = () => {
  const path = usePath()
  const [session, setSession] = useState<Session | null>()
  const [reason, setReason] = useState<string>()
  const [bootError, setBootError] = useState<string>()

  const signedOut = useCallback((why: string) => {
    setReason(why)
    setSession(null)
  }, [])
  const signedIn = (s: Session) => {
    configureApi({ csrfToken: s.csrfToken, onSignedOut: signedOut })
    setReason(undefined)
    setSession(s)
  }
  const boot = () => {
    setBootError(undefined)
    api<Session>("/session", { quiet401: true }).then(signedIn, (error) => {
      if (error instanceof ApiError && error.status === 401) {
        // Say why a session ended (expired, key revoked…); a first visit needs no explanation.
        if (error.message !== "Sign in to the dashboard first") setReason(error.message)
        setSession(null)
      }
      else setBootError(messageOf(error))
    })
  }
  useEffect(boot, [])

  const slug = path.replace(/^\/dashboard\/?/, "").split("/")[0]
  const allowed = session ? pagesFor(session) : []
  useEffect(() => {
    // The bare /dashboard (and the sign-in it leads to) opens the session's first page.
    if (session && slug === "") navigate(`/dashboard/${allowed[0].slug}`, { replace: true })
  }, [session, slug])
  useEffect(() => {
    const page = PAGES.find((p) => p.slug === slug)
    document.title = `${page?.title ?? "Dashboard"} · svc-gateway`
  }, [slug])

  if (bootError) return <main class="container"><ErrorNotice message={bootError} retry={boot} /></main>
  if (session === undefined) return <main class="container"><Loading what="the dashboard" /></main>
  if (session === null) return <SignIn reason={reason} onSignedIn={signedIn} />

  const signOut = async () => {
    try {
      await api("/session", { method: "DELETE" })
    } finally {
      signedOut("You are signed out.")
      navigate("/dashboard")
    }
  }
  const page = allowed.find((p) => p.slug === slug)
  // A second path segment opens one item of a page that has item pages (runs, artifacts, batches).
  const itemId = page !== undefined ? path.split("/")[3] : undefined
  const item = itemId === undefined || itemId === "" ? undefined : decodeURIComponent(itemId)
  return (
    <>
      <Nav session={session} current={slug} onSignOut={signOut} />
      <main class="container">
        {item !== undefined && slug === "runs"
          ? <RunDetailPage runId={item} session={session} />
          : item !== undefined && slug === "artifacts"
          ? <ArtifactDetailPage artifactId={item} session={session} />
          : item !== undefined && slug === "batches"
          ? <BatchDetailPage batchId={item} session={session} />
          : page
          ? page.render({ session, signedOut })
          : PAGES.some((p) => p.slug === slug)
          ? <ErrorNotice message="This page is for operators: sign out and sign in with the admin token to see it." />
          : slug === "" ? <Loading what="the dashboard" /> : <NotFoundPage />}
      </main>
    </>
  )
}
