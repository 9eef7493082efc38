import { defineConfig } from "vitest/config"

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    globalSetup: ["test/support/global-setup.ts"],
    reporters: ["default", "./test/support/summary-reporter.ts"],
    // Integration suites start real gateway processes; two cores run two files at a time.
    maxWorkers: 2,
    testTimeout: 30_000,
    // expect.poll waits on a condition (never a fixed sleep); 1 s, vitest's default, is too short
    // for a page or a ledger flush on a loaded 2-core machine.
    expect: { poll: { timeout: 10_000 } },
    hookTimeout: 60_000
  }
})
