import { defineConfig } from "vitest/config"
import { applyTestEnvironment } from "./test/support/test-environment.ts"

// Compile cache and a tmpfs temporary directory for every test and gateway process (see there).
applyTestEnvironment()

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    globalSetup: ["test/support/global-setup.ts"],
    reporters: ["default", "./test/support/summary-reporter.ts"],
    // Integration suites start real gateway processes. Three files at a time on two cores: many
    // files spend most of their time waiting (on a gateway's timers, a browser, PostgreSQL's own
    // process), so with two the cores were only ~60–67% busy (user+sys ÷ wall). Measured on full
    // runs: 2 workers 328–340 s, 3 workers 271 s, every test passing.
    maxWorkers: 3,
    // Files share their worker's module graph instead of each importing the gateway's modules
    // afresh: on 77 of the files this cut the CPU time by a third (201 s → 137 s), and the suite
    // is CPU-bound on two cores. A file must not leave global state behind (process.env, globals):
    // configuration goes through layers or the child process's env.
    isolate: false,
    testTimeout: 30_000,
    // expect.poll waits on a condition (never a fixed sleep); 1 s, vitest's default, is too short
    // for a page or a ledger flush on a loaded 2-core machine.
    expect: { poll: { timeout: 10_000 } },
    hookTimeout: 60_000
  }
})
