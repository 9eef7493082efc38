/**
 * `serve` runs under glibc allocator settings, V8's young-generation settings, and on one core
 * with `--single-threaded-gc` (src/util/process-settings.ts): the process replaces itself (same pid) with them, unless the
 * operator set their own. The subject is a process's start, so each case is a child process; one
 * core is `taskset -c 0`.
 */
import { spawnSync } from "node:child_process"
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { availableParallelism, tmpdir } from "node:os"
import { join } from "node:path"
import { pathToFileURL } from "node:url"
import { afterAll, describe, expect, it } from "vitest"
import { missingSettings } from "../../src/util/process-settings.ts"

const MODULE = pathToFileURL(join(import.meta.dirname, "..", "..", "src", "util", "process-settings.ts")).href
const dir = mkdtempSync(join(tmpdir(), "process-settings-"))
const script = join(dir, "probe.mjs")
// Prints what the process ended up with: the setting, its pid, and how many times it started.
writeFileSync(script, `import { applyProcessSettings } from ${JSON.stringify(MODULE)}
const starts = Number(process.env.PROBE_STARTS ?? 0) + 1
process.env.PROBE_STARTS = String(starts)
applyProcessSettings()
console.log(JSON.stringify({ arenas: process.env.MALLOC_ARENA_MAX ?? null, tunables: process.env.GLIBC_TUNABLES ?? null, pid: process.pid, starts, argv: process.argv.slice(2), execArgv: process.execArgv }))
`)

const ALLOCATOR_UNSET = { MALLOC_ARENA_MAX: undefined, GLIBC_TUNABLES: undefined }

/** Runs the probe with `env` over the test's own, `nodeArgs` before it, on one core when `oneCore`. */
const probe = (env: Record<string, string | undefined>, options: { oneCore?: boolean; nodeArgs?: Array<string> } = {}) => {
  const childEnv: Record<string, string | undefined> = { ...process.env, ...env }
  for (const [name, value] of Object.entries(childEnv)) if (value === undefined) delete childEnv[name]
  const command = [process.execPath, ...(options.nodeArgs ?? []), script, "serve", "--port", "0"]
  const child = options.oneCore === true
    ? spawnSync("taskset", ["-c", "0", ...command], { env: childEnv, encoding: "utf8" })
    : spawnSync(command[0], command.slice(1), { env: childEnv, encoding: "utf8" })
  expect(child.status, child.stderr).toBe(0)
  const printed = JSON.parse(child.stdout) as {
    arenas: string | null
    tunables: string | null
    pid: number
    starts: number
    argv: Array<string>
    execArgv: Array<string>
  }
  return { ...printed, samePid: printed.pid === child.pid }
}

describe("missingSettings", () => {
  const CAP = "--max-semi-space-size=16"
  const NP = "--no-allocation-site-pretenuring"
  it("asks for the allocator's variables unless either is set, and the flag on one core unless the command line says either way", () => {
    expect(missingSettings({}, [], 2)).toEqual({ env: { MALLOC_ARENA_MAX: "2", GLIBC_TUNABLES: expect.any(String) }, flags: [CAP, NP] })
    expect(missingSettings({ MALLOC_ARENA_MAX: "8" }, [], 1)).toEqual({ env: {}, flags: [CAP, NP, "--single-threaded-gc"] })
    expect(missingSettings({ GLIBC_TUNABLES: "x" }, ["--single-threaded-gc"], 1)).toEqual({ env: {}, flags: [CAP, NP] })
    expect(missingSettings({ GLIBC_TUNABLES: "x" }, ["--no-single-threaded-gc"], 1)).toEqual({ env: {}, flags: [CAP, NP] })
    expect(missingSettings({ GLIBC_TUNABLES: "x" }, ["--no_single_threaded_gc"], 1)).toEqual({ env: {}, flags: [CAP, NP] })
    expect(missingSettings({ GLIBC_TUNABLES: "x" }, ["--single-threaded"], 1)).toEqual({ env: {}, flags: [CAP, NP, "--single-threaded-gc"] })
  })

  it("caps the young generation unless the operator sized it (command line or NODE_OPTIONS)", () => {
    expect(missingSettings({ GLIBC_TUNABLES: "x" }, ["--max-semi-space-size=64"], 2)).toEqual({ env: {}, flags: [NP] })
    expect(missingSettings({ GLIBC_TUNABLES: "x" }, ["--min_semi_space_size=4"], 2)).toEqual({ env: {}, flags: [NP] })
    // NODE_OPTIONS is the operator's too (node takes these flags there): one added on the command line would override it.
    expect(missingSettings({ GLIBC_TUNABLES: "x", NODE_OPTIONS: "--max-old-space-size=512  --max-semi-space-size=32" }, [], 2)).toEqual({ env: {}, flags: [NP] })
    expect(missingSettings({ GLIBC_TUNABLES: "x", NODE_OPTIONS: "--max-old-space-size=512" }, [], 2)).toEqual({ env: {}, flags: [CAP, NP] })
    expect(missingSettings({ GLIBC_TUNABLES: "x" }, ["--max-old-space-size=512"], 2)).toEqual({ env: {}, flags: [CAP, NP] })
  })

  it("turns allocation-site pretenuring off unless the operator's command line says either way", () => {
    const sized = ["--max-semi-space-size=16"]
    expect(missingSettings({ GLIBC_TUNABLES: "x" }, [...sized, "--allocation-site-pretenuring"], 2)).toEqual({ env: {}, flags: [] })
    expect(missingSettings({ GLIBC_TUNABLES: "x" }, [...sized, "--no-allocation-site-pretenuring"], 2)).toEqual({ env: {}, flags: [] })
    expect(missingSettings({ GLIBC_TUNABLES: "x" }, [...sized, "--no_allocation_site_pretenuring"], 1)).toEqual({ env: {}, flags: ["--single-threaded-gc"] })
    expect(missingSettings({ GLIBC_TUNABLES: "x" }, [...sized, "--allocation-site-pretenuring-x"], 2)).toEqual({ env: {}, flags: [NP] })
  })
})

describe.runIf(process.platform === "linux")("process settings", () => {
  afterAll(() => rmSync(dir, { recursive: true, force: true }))

  it("replaces the process with itself under MALLOC_ARENA_MAX=2 and fixed thresholds, arguments and environment kept", () => {
    const result = probe(ALLOCATOR_UNSET)
    expect(result.arenas).toBe("2")
    expect(result.tunables).toBe("glibc.malloc.trim_threshold=131072:glibc.malloc.mmap_threshold=131072")
    // The second start ran with the first one's environment (PROBE_STARTS=1): the same process image replaced.
    expect(result.starts).toBe(2)
    expect(result.samePid).toBe(true)
    expect(result.argv).toEqual(["serve", "--port", "0"])
    expect(result.execArgv).toContain("--max-semi-space-size=16")
    expect(result.execArgv).toContain("--no-allocation-site-pretenuring")
    if (availableParallelism() > 1) expect(result.execArgv).not.toContain("--single-threaded-gc")
  })

  it("on one core, starts again with --single-threaded-gc, the operator's node flags and allocator settings kept", () => {
    const both = probe(ALLOCATOR_UNSET, { oneCore: true, nodeArgs: ["--stack-trace-limit=20"] })
    expect(both).toMatchObject({ arenas: "2", starts: 2, samePid: true, argv: ["serve", "--port", "0"] })
    expect(both.execArgv).toEqual(["--max-semi-space-size=16", "--no-allocation-site-pretenuring", "--single-threaded-gc", "--stack-trace-limit=20"])
    const flagOnly = probe({ MALLOC_ARENA_MAX: "4", GLIBC_TUNABLES: undefined }, { oneCore: true })
    expect(flagOnly).toMatchObject({
      arenas: "4", tunables: null, starts: 2, samePid: true,
      execArgv: ["--max-semi-space-size=16", "--no-allocation-site-pretenuring", "--single-threaded-gc"]
    })
    const operatorSaid = probe({ MALLOC_ARENA_MAX: "4" }, { oneCore: true, nodeArgs: ["--no-single-threaded-gc", "--max-semi-space-size=8", "--allocation-site-pretenuring"] })
    expect(operatorSaid).toMatchObject({ starts: 1, execArgv: ["--no-single-threaded-gc", "--max-semi-space-size=8", "--allocation-site-pretenuring"] })
    // Node takes the young generation's size in NODE_OPTIONS (not --single-threaded-gc nor pretenuring).
    const inNodeOptions = probe({ MALLOC_ARENA_MAX: "4", NODE_OPTIONS: "--max-semi-space-size=8" }, { oneCore: true })
    expect(inNodeOptions).toMatchObject({ starts: 2, execArgv: ["--no-allocation-site-pretenuring", "--single-threaded-gc"] })
  })

  it("keeps an operator's own setting of either variable and of the young generation, and then starts once", () => {
    const sized = { nodeArgs: ["--max-semi-space-size=32", "--no-allocation-site-pretenuring"] }
    expect(probe({ MALLOC_ARENA_MAX: "4", GLIBC_TUNABLES: undefined }, sized)).toMatchObject({ arenas: "4", tunables: null, starts: 1, samePid: true })
    expect(probe({ MALLOC_ARENA_MAX: undefined, GLIBC_TUNABLES: "glibc.malloc.tcache_count=0" }, sized))
      .toMatchObject({ arenas: null, tunables: "glibc.malloc.tcache_count=0", starts: 1, samePid: true })
    // The variables set, the young generation not: one more start, for the cap alone.
    expect(probe({ MALLOC_ARENA_MAX: "4", GLIBC_TUNABLES: undefined }))
      .toMatchObject({ arenas: "4", tunables: null, starts: 2, samePid: true, execArgv: ["--max-semi-space-size=16", "--no-allocation-site-pretenuring"] })
  })
})
