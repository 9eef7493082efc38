/**
 * `serve` runs under glibc allocator settings (src/util/malloc-settings.ts): the process replaces
 * itself (same pid) with them, unless the operator set their own. The subject is a process's start, so
 * each case is a child process.
 */
import { spawnSync } from "node:child_process"
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { pathToFileURL } from "node:url"
import { afterAll, describe, expect, it } from "vitest"

const MODULE = pathToFileURL(join(import.meta.dirname, "..", "..", "src", "util", "malloc-settings.ts")).href
const dir = mkdtempSync(join(tmpdir(), "malloc-settings-"))
const script = join(dir, "probe.mjs")
// Prints what the process ended up with: the setting, its pid, and how many times it started.
writeFileSync(script, `import { applyMallocSettings } from ${JSON.stringify(MODULE)}
const starts = Number(process.env.PROBE_STARTS ?? 0) + 1
process.env.PROBE_STARTS = String(starts)
applyMallocSettings()
console.log(JSON.stringify({ arenas: process.env.MALLOC_ARENA_MAX ?? null, tunables: process.env.GLIBC_TUNABLES ?? null, pid: process.pid, starts, argv: process.argv.slice(2) }))
`)

const probe = (env: Record<string, string | undefined>) => {
  const childEnv: Record<string, string | undefined> = { ...process.env, ...env }
  for (const [name, value] of Object.entries(childEnv)) if (value === undefined) delete childEnv[name]
  const child = spawnSync(process.execPath, [script, "serve", "--port", "0"], { env: childEnv, encoding: "utf8" })
  expect(child.status, child.stderr).toBe(0)
  const printed = JSON.parse(child.stdout) as { arenas: string | null; tunables: string | null; pid: number; starts: number; argv: Array<string> }
  return { ...printed, samePid: printed.pid === child.pid }
}

describe.runIf(process.platform === "linux")("malloc settings", () => {
  afterAll(() => rmSync(dir, { recursive: true, force: true }))

  it("replaces the process with itself under MALLOC_ARENA_MAX=2 and fixed thresholds, arguments and environment kept", () => {
    const result = probe({ MALLOC_ARENA_MAX: undefined, GLIBC_TUNABLES: undefined })
    expect(result.arenas).toBe("2")
    expect(result.tunables).toBe("glibc.malloc.trim_threshold=131072:glibc.malloc.mmap_threshold=131072")
    // The second start ran with the first one's environment (PROBE_STARTS=1): the same process image replaced.
    expect(result.starts).toBe(2)
    expect(result.samePid).toBe(true)
    expect(result.argv).toEqual(["serve", "--port", "0"])
  })

  it("keeps an operator's own setting of either variable and starts once", () => {
    expect(probe({ MALLOC_ARENA_MAX: "4", GLIBC_TUNABLES: undefined })).toMatchObject({ arenas: "4", tunables: null, starts: 1, samePid: true })
    expect(probe({ MALLOC_ARENA_MAX: undefined, GLIBC_TUNABLES: "glibc.malloc.tcache_count=0" }))
      .toMatchObject({ arenas: null, tunables: "glibc.malloc.tcache_count=0", starts: 1, samePid: true })
  })
})
