/**
 * The extension point for a surface built elsewhere: its nav entry appears once the gateway serves
 * its API (the session's `features`); until its own page is added to `PAGES` in app.tsx, this one
 * says where the API is. (Artifacts and batches have their own pages now.)
 */
import { PageHeader } from "../components.tsx"

export const ExtensionPage = ({ title, api }: { title: string; api: string }) => (
  <>
    <PageHeader title={title} />
    <article>
      <p>This gateway serves the {title.toLowerCase()} API at <code>{api}</code>.</p>
      <p class="muted">Its dashboard page is not built yet. Until then, use the API directly with any key that has the surface.</p>
    </article>
  </>
)

export const NotFoundPage = () => (
  <>
    <PageHeader title="No such page" />
    <p>Pick a page from the menu above.</p>
  </>
)
