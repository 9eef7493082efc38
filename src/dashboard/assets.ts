/**
 * The dashboard's built files (`dashboard/dist/`, committed; rebuilt by `npm run build:dashboard`),
 * read into memory once at start with a gzip copy of each text file, so serving one is a map read:
 * no disk access and no compression on the request path.
 *
 * Asset names carry a content hash (`main-3QX7….js`), so they are served as immutable for a year;
 * `index.html` names them and is served `no-cache` with an ETag, so a new build is picked up at
 * the next page load.
 */
import { Context, Layer } from "effect"
import { createHash } from "node:crypto"
import { existsSync, readdirSync, readFileSync } from "node:fs"
import { extname, join } from "node:path"
import { gzipSync } from "node:zlib"

export interface StaticFile {
  readonly body: Uint8Array
  /** Present for compressible files worth compressing. */
  readonly gzip: Uint8Array | undefined
  readonly contentType: string
  /** A strong validator: the content's hash. */
  readonly etag: string
}

const CONTENT_TYPES: Record<string, string> = {
  ".html": "text/html; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".svg": "image/svg+xml",
  ".png": "image/png",
  ".woff2": "font/woff2",
  ".json": "application/json"
}
const COMPRESSIBLE = new Set([".html", ".js", ".css", ".svg", ".json"])

/** Where the build writes; resolved from this file so the working directory does not matter. */
const DIST_DIR = join(import.meta.dirname, "..", "..", "dashboard", "dist")

const load = (path: string): StaticFile => {
  const body = readFileSync(path)
  const ext = extname(path)
  return {
    body,
    gzip: COMPRESSIBLE.has(ext) && body.length > 1024 ? gzipSync(body, { level: 9 }) : undefined,
    contentType: CONTENT_TYPES[ext] ?? "application/octet-stream",
    etag: `"${createHash("sha256").update(body).digest("base64url").slice(0, 22)}"`
  }
}

export class DashboardAssets extends Context.Service<DashboardAssets, {
  /** The page shell; undefined when the dashboard was not built. */
  readonly index: StaticFile | undefined
  /** A hashed asset by file name (`main-3QX7….js`). */
  asset(name: string): StaticFile | undefined
}>()("gateway/dashboard/DashboardAssets") {
  static readonly layerFrom = (dir: string) =>
    Layer.sync(DashboardAssets, () => {
      const indexPath = join(dir, "index.html")
      const assetsDir = join(dir, "assets")
      const assets = new Map<string, StaticFile>()
      if (existsSync(assetsDir)) {
        for (const name of readdirSync(assetsDir)) assets.set(name, load(join(assetsDir, name)))
      }
      return DashboardAssets.of({
        index: existsSync(indexPath) ? load(indexPath) : undefined,
        asset: (name) => assets.get(name)
      })
    })
  static readonly layer = DashboardAssets.layerFrom(DIST_DIR)
}
