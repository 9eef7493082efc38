/**
 * Page routing on the History API: paths under `/dashboard/` name pages, links change the path
 * without a reload, and the gateway serves the same page shell for every such path.
 */
import { useEffect, useState } from "preact/hooks"

const CHANGE = "dashboard:navigate"

export const navigate = (to: string, options: { replace?: boolean } = {}) => {
  if (to === location.pathname + location.search) return
  if (options.replace) history.replaceState(null, "", to)
  else history.pushState(null, "", to)
  dispatchEvent(new Event(CHANGE))
}

/** The current path, re-rendered on links, back and forward. */
export const usePath = () => {
  const [path, setPath] = useState(location.pathname)
  useEffect(() => {
    const update = () => setPath(location.pathname)
    addEventListener("popstate", update)
    addEventListener(CHANGE, update)
    return () => {
      removeEventListener("popstate", update)
      removeEventListener(CHANGE, update)
    }
  }, [])
  return path
}

/** A plain click on a link navigates in place; modified clicks (new tab…) keep the browser's way. */
export const onLinkClick = (event: MouseEvent) => {
  const anchor = (event.currentTarget as HTMLAnchorElement)
  if (event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey || event.altKey) return
  event.preventDefault()
  navigate(anchor.getAttribute("href")!)
}
