/**
 * Re-renders the Markdown summary and charts of a finished run from its JSON (after the report
 * code changed, or to look at an older run):
 *
 *   node bench/render.ts bench/results/<timestamp>.json [--latest]
 *
 * `--latest` also copies the summary to latest.md.
 */
import { copyFileSync, readFileSync } from "node:fs"
import { basename, dirname, join } from "node:path"
import { type BenchResult, writeReport } from "./lib/report.ts"

const file = process.argv[2]
if (file === undefined || !file.endsWith(".json")) {
  console.error("usage: node bench/render.ts bench/results/<timestamp>.json [--latest]")
  process.exit(2)
}
const result = JSON.parse(readFileSync(file, "utf8"), (_k, v) => (v === "NaN" || v === "Infinity" || v === "-Infinity" ? Number(v) : v)) as BenchResult
const dir = dirname(file)
const md = writeReport(result, dir, basename(file, ".json"))
if (process.argv.includes("--latest")) copyFileSync(md, join(dir, "latest.md"))
console.log(`wrote ${md}`)
