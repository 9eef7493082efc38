#!/usr/bin/env node
/**
 * Maintainer tool: `node src/storage/make-template.ts` runs initdb once with the installed PGlite
 * and writes `src/storage/templates/pglite-<version>.tar.gz`, the empty database a new data dir is
 * unpacked from (see template.ts). Run it after upgrading @electric-sql/pglite and commit the file
 * (and remove the old version's); test/storage/template.test.ts fails until then.
 */
import { Effect } from "effect"
import { mkdtempSync, readdirSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { embeddedInitdbOptions, initialize } from "./embedded-database.ts"
import { pgliteVersion, writeTemplate } from "./template.ts"

const dir = mkdtempSync(join(tmpdir(), "pglite-template-"))
try {
  const pgDir = join(dir, "pglite")
  await Effect.runPromise(initialize({ mode: "initialize", pgDir, settings: [], initdbOptions: embeddedInitdbOptions, maxWasmMemoryMb: 1024 }))
  const file = join(import.meta.dirname, "templates", `pglite-${pgliteVersion()}.tar.gz`)
  writeTemplate(pgDir, file)
  console.log(`wrote ${file} (${readdirSync(pgDir).length} top-level entries)`)
} finally {
  rmSync(dir, { recursive: true, force: true })
}
