/**
 * Builds the dashboard with esbuild: `dashboard/src/main.tsx` (Preact + Pico CSS + Chart.js) into
 * `dashboard/dist/assets/main-<hash>.{js,css}` and an `index.html` that names them. The output is
 * committed, so `npm install && npm start` serves the dashboard with no build step; run
 * `npm run build:dashboard` after changing `dashboard/src` (a test fails while dist is stale).
 *
 *   node dashboard/build.ts            → writes dashboard/dist
 *   buildDashboard()                   → the files, in memory (the staleness test compares them)
 */
import { build } from "esbuild"
import { mkdirSync, rmSync, writeFileSync } from "node:fs"
import { basename, dirname, join } from "node:path"

const ROOT = join(import.meta.dirname, "..")
export const DIST = join(import.meta.dirname, "dist")

/** A gauge glyph as the tab icon, inline so the page needs no extra request. */
const ICON = "data:image/svg+xml," + encodeURIComponent(
  `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 16 16"><rect width="16" height="16" rx="3" fill="#0072B2"/>` +
    `<path d="M3 11a5 5 0 0 1 10 0" stroke="#fff" stroke-width="1.6" fill="none"/><path d="M8 11l3-4" stroke="#fff" stroke-width="1.6"/></svg>`
)

const page = (js: string, css: string) => `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="color-scheme" content="light dark">
<title>svc-gateway dashboard</title>
<link rel="icon" href="${ICON}">
<link rel="stylesheet" href="/dashboard/assets/${css}">
<script type="module" src="/dashboard/assets/${js}"></script>
</head>
<body>
<div id="app"><noscript>The dashboard needs JavaScript.</noscript></div>
</body>
</html>
`

/** Every output file by its path relative to `dist/`. */
export const buildDashboard = async (): Promise<Map<string, Uint8Array>> => {
  const result = await build({
    absWorkingDir: ROOT,
    entryPoints: ["dashboard/src/main.tsx"],
    bundle: true,
    minify: true,
    format: "esm",
    target: ["chrome111", "firefox114", "safari16.4"],
    jsx: "automatic",
    jsxImportSource: "preact",
    define: { "process.env.NODE_ENV": "\"production\"" },
    outdir: "dashboard/dist/assets",
    entryNames: "[name]-[hash]",
    assetNames: "[name]-[hash]",
    legalComments: "eof",
    charset: "utf8",
    write: false,
    logLevel: "warning"
  })
  const files = new Map<string, Uint8Array>()
  for (const file of result.outputFiles) files.set(`assets/${basename(file.path)}`, file.contents)
  const names = [...files.keys()].map((p) => basename(p))
  const js = names.find((n) => n.endsWith(".js"))
  const css = names.find((n) => n.endsWith(".css"))
  if (js === undefined || css === undefined) throw new Error(`the build made no JS or CSS bundle: ${names.join(", ")}`)
  files.set("index.html", new TextEncoder().encode(page(js, css)))
  return files
}

if (process.argv[1] === import.meta.filename) {
  const files = await buildDashboard()
  rmSync(DIST, { recursive: true, force: true })
  for (const [path, contents] of files) {
    mkdirSync(dirname(join(DIST, path)), { recursive: true })
    writeFileSync(join(DIST, path), contents)
  }
  for (const [path, contents] of files) console.log(`dashboard/dist/${path}  ${(contents.length / 1024).toFixed(1)} KiB`)
}
