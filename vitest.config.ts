import { join } from "node:path"
import { defineConfig } from "vitest/config"
import LongFilesFirst from "./test/support/long-files-first.ts"
import { applyTestEnvironment } from "./test/support/test-environment.ts"

// Compile cache and a tmpfs temporary directory for every test and gateway process (see there).
applyTestEnvironment()

const LATENCY = ["test/http/hostile-input.test.ts", "test/http/hostile-upstream-size.test.ts"]

export default defineConfig({
  test: {
    globalSetup: ["test/support/global-setup.ts"],
    // `TEST_CPU_LOG=FILE`: each test's and file's CPU, for finding where the suite's time goes (see there).
    setupFiles: process.env.TEST_CPU_LOG === undefined ? [] : ["test/support/cpu-probe.ts"],
    // Vitest's transform cache (fsModuleCache, on by default) in this checkout's own directory
    // (gitignored) instead of node_modules/.vitest-cache: a second worktree whose node_modules is
    // a symlink to this one's shares that directory, and vitest empties it whenever its lockfile
    // hash differs, which counts the patches/ directory's mtime (different in every worktree), so
    // a run in one tree cleared the cache under a run in the other: ENOENT on the cleared modules
    // failed 23 files of one full run (2026-11-27).
    fsModuleCachePath: join(import.meta.dirname, ".cache", "vitest"),
    reporters: ["default", "./test/support/summary-reporter.ts"],
    // Integration suites start real gateway processes. Many files spend most of their time
    // waiting (on a gateway's timers, a recovery fence, a browser, PostgreSQL's own process), so
    // with few workers the two cores sat idle while the waiting files held every worker: with 3,
    // vmstat showed the CPU 50–60% idle for the first ~80 s of a run. Measured on full runs on this
    // 2-core machine (2026-11-24): 3 workers 142–145 s, 4 workers 137 s, 6 workers 122–124 s with the
    // CPU busy from ~20 s to the end. (Earlier, on a slower VM: 2 workers 328–340 s, 3 workers 271 s.)
    maxWorkers: 6,
    // Without vitest's cached durations (a clean clone, as CI's), the long files start first
    // instead of the largest: see there.
    sequence: { sequencer: LongFilesFirst },
    projects: [
      // (Each project names its files: a project's arrays are appended to the root's, not replaced.)
      { test: { name: "suite", include: ["test/**/*.test.ts"], exclude: LATENCY } },
      // Files that measure another client's latency beside their own heavy requests (the issue's
      // 100 ms bound): run after the others, one at a time, so no other file takes their cores.
      // Beside two other files the bound failed in one full run of two.
      { test: { name: "latency", include: LATENCY, maxWorkers: 1, sequence: { groupOrder: 1 } } }
    ],
    // Files share their worker's module graph instead of each importing the gateway's modules
    // afresh: on 77 of the files this cut the CPU time by a third (201 s → 137 s), and the suite
    // is CPU-bound on two cores. A file must not leave global state behind (process.env, globals):
    // configuration goes through layers or the child process's env.
    isolate: false,
    // A timeout catches a hang, not slowness (no test asserts speed; bench/ measures it): on a VM
    // ~3× slower than most, in a clean clone's first run (no compile or transform cache), a heavy
    // test took 30.2 s (artifact uploads, 2026-11-27) and a dozen others 15–21 s. The fuzz and
    // latency suites bound their own waits.
    testTimeout: 90_000,
    // expect.poll waits on a condition (never a fixed sleep); 1 s, vitest's default, is too short
    // for a page or a ledger flush on a loaded 2-core machine.
    expect: { poll: { timeout: 10_000 } },
    hookTimeout: 120_000
  }
})
