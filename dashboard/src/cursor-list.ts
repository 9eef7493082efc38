/**
 * A list page's data: pages of `/dashboard/api<path>?limit=25&…filters&after=<cursor>`, reloaded
 * from the first page whenever a filter changes; `more()` appends the next page.
 */
import { useEffect, useState } from "preact/hooks"
import { api, messageOf } from "./api.ts"

interface CursorPage<T> {
  readonly data: ReadonlyArray<T>
  readonly nextCursor: string | null
}

export const useCursorList = <T>(path: string, filters: Record<string, string>) => {
  const [items, setItems] = useState<ReadonlyArray<T>>()
  const [cursor, setCursor] = useState<string | null>(null)
  const [loading, setLoading] = useState(true)
  const [error, setError] = useState<string>()
  const load = async (after: string | null, replace: boolean) => {
    setLoading(true)
    setError(undefined)
    try {
      const params = new URLSearchParams({ limit: "25" })
      for (const [name, value] of Object.entries(filters)) if (value) params.set(name, value)
      if (after) params.set("after", after)
      const page = await api<CursorPage<T>>(`${path}?${params}`)
      setItems((old) => (replace ? page.data : [...(old ?? []), ...page.data]))
      setCursor(page.nextCursor)
    } catch (e) {
      setError(messageOf(e))
    }
    setLoading(false)
  }
  useEffect(() => void load(null, true), Object.values(filters))
  return { items, cursor, loading, error, reload: () => load(null, true), more: () => cursor && load(cursor, false) }
}
