/**
 * The committed bundle (`dashboard/dist`) is what the sources build to: a change to
 * `dashboard/src` without `npm run build:dashboard` fails here. And it works offline: the page
 * loads nothing but its own assets.
 */
import { readdirSync, readFileSync } from "node:fs"
import { join } from "node:path"
import { describe, expect, it } from "vitest"
import { buildDashboard, DIST } from "../../dashboard/build.ts"

const committed = () => {
  const files = new Map<string, string>()
  files.set("index.html", readFileSync(join(DIST, "index.html"), "utf8"))
  for (const name of readdirSync(join(DIST, "assets"))) files.set(`assets/${name}`, readFileSync(join(DIST, "assets", name), "utf8"))
  return files
}

describe("dashboard bundle", () => {
  it("is up to date with dashboard/src (run `npm run build:dashboard` if this fails)", async () => {
    const built = await buildDashboard()
    const decoded = new Map([...built].map(([path, bytes]) => [path, new TextDecoder().decode(bytes)]))
    const onDisk = committed()
    expect([...onDisk.keys()].sort()).toEqual([...decoded.keys()].sort())
    for (const [path, text] of decoded) expect(onDisk.get(path) === text, `${path} differs from a fresh build`).toBe(true)
  }, 60_000)

  it("loads only its own hashed assets: no CDN, no remote font or stylesheet", () => {
    const files = committed()
    const html = files.get("index.html")!
    const references = [...html.matchAll(/(?:src|href)="([^"]+)"/g)].map((m) => m[1]).filter((ref) => !ref.startsWith("data:"))
    expect(references.length).toBe(2)
    for (const ref of references) expect(ref).toMatch(/^\/dashboard\/assets\/main-[A-Z0-9]+\.(js|css)$/)
    for (const [path, text] of files) {
      expect(text, path).not.toMatch(/url\(\s*["']?(https?:)?\/\//)
      expect(text, path).not.toMatch(/@import\s+(url\()?["']?https?:/)
    }
  })
})
