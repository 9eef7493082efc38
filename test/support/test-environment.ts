/**
 * Where a test run's files and Node's compile cache go; `vitest.config.ts` applies it in the main
 * process before any worker or gateway process starts, so all of them inherit it.
 *
 * A test gateway's start was ~3 s of CPU on this 2-core machine, of which ~0.7 s was Node compiling
 * the same TypeScript again in every process and ~0.6 s writing and syncing a fresh data dir's
 * ~40 MB database on a disk-backed /tmp. Neither changes what a test proves:
 * - NODE_COMPILE_CACHE is Node's own cache of compiled modules, keyed by their content.
 * - The run's temporary directory (TMPDIR, read by `os.tmpdir()` at each call) moves to tmpfs when
 *   there is one with room: the same files, the same binary, the same crash and restart behaviour
 *   for a killed process (the page cache survives a SIGKILL either way); only a whole-machine power
 *   loss differs, which no test here simulates. `TEST_TMPDIR` chooses the directory explicitly.
 * The run's directory is removed by the global setup's teardown.
 */
import { existsSync, mkdirSync, mkdtempSync, statfsSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"

/** Each embedded data dir is ~40 MB and a file may hold a few at once; leave plenty of room. */
const MIN_FREE_BYTES = 2 * 1024 ** 3

const roomyTmpfs = (dir: string) => {
  try {
    if (!existsSync(dir)) return false
    const stats = statfsSync(dir)
    return stats.bavail * stats.bsize >= MIN_FREE_BYTES
  } catch {
    return false
  }
}

/** Marks the directory this module made, so the teardown removes only that one. */
export const RUN_TMPDIR_VARIABLE = "SVC_GATEWAY_TEST_RUN_TMPDIR"

export const applyTestEnvironment = () => {
  if (process.env[RUN_TMPDIR_VARIABLE] !== undefined) return // a nested config load: already applied
  const diskTmp = tmpdir()
  if (process.env.NODE_COMPILE_CACHE === undefined) {
    const cache = join(diskTmp, "svc-gateway-node-compile-cache")
    mkdirSync(cache, { recursive: true })
    process.env.NODE_COMPILE_CACHE = cache
  }
  const base = process.env.TEST_TMPDIR ?? (roomyTmpfs("/dev/shm") ? "/dev/shm" : diskTmp)
  mkdirSync(base, { recursive: true })
  const runDir = mkdtempSync(join(base, "svc-gateway-test-run-"))
  process.env.TMPDIR = runDir
  process.env[RUN_TMPDIR_VARIABLE] = runDir
}
