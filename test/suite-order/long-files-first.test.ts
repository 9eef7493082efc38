/**
 * The suite's own start order (test/support/long-files-first.ts): without vitest's cached
 * durations the long files start first, within their project; with them, vitest's order stands.
 */
import { existsSync } from "node:fs"
import { join } from "node:path"
import type { TestSpecification } from "vitest/node"
import { describe, expect, it } from "vitest"
import LongFilesFirst, { LONG_FILES } from "../support/long-files-first.ts"

const testDir = join(import.meta.dirname, "..")

/** A project as vitest's sequencer reads it: its name, its group and whether it isolates files. */
const project = (name: string, groupOrder: number) => ({ name, config: { isolate: false, sequence: { groupOrder } } })

const spec = (path: string, of: ReturnType<typeof project>) => ({ moduleId: join(testDir, path), project: of }) as unknown as TestSpecification

/** Sorts with vitest's own sequencer logic underneath, given which files have cached durations. */
const sortWith = (specs: Array<TestSpecification>, cached: ReadonlyMap<string, number> = new Map()) => {
  const cache = { getTestSpecificationResult: (s: TestSpecification) => (cached.has(s.moduleId) ? { duration: cached.get(s.moduleId)!, failed: false } : undefined) }
  const sequencer = new LongFilesFirst({ cache } as never)
  return sequencer.sort(specs).then((sorted) => sorted.map((s) => s.moduleId.slice(testDir.length + 1)))
}

describe("the suite's start order", () => {
  it("names only test files that exist", () => {
    const missing = LONG_FILES.filter((path) => !existsSync(join(testDir, path)))
    expect(missing).toEqual([])
  })

  it("without cached durations, starts the named long files first in their project, longest first", async () => {
    const suite = project("suite", 0)
    const latency = project("latency", 1)
    const sorted = await sortWith([
      spec("model/money.test.ts", suite),
      spec("http/hostile-input.test.ts", latency),
      spec("cli/cli.test.ts", suite),
      spec("artifacts/values.test.ts", suite),
      spec("fuzz/fuzz.test.ts", suite)
    ])
    // The latency project still runs after the suite's files (its group comes later).
    expect(sorted.slice(0, 2)).toEqual(["fuzz/fuzz.test.ts", "cli/cli.test.ts"])
    expect(sorted.at(-1)).toBe("http/hostile-input.test.ts")
    expect(sorted.slice(2, 4).sort()).toEqual(["artifacts/values.test.ts", "model/money.test.ts"])
  })

  it("with cached durations, keeps vitest's order (longest last run first)", async () => {
    const suite = project("suite", 0)
    const files = ["fuzz/fuzz.test.ts", "cli/cli.test.ts", "model/money.test.ts"]
    const cached = new Map([[join(testDir, "model/money.test.ts"), 90_000], [join(testDir, "cli/cli.test.ts"), 1_000], [join(testDir, "fuzz/fuzz.test.ts"), 500]])
    expect(await sortWith(files.map((path) => spec(path, suite)), cached)).toEqual(["model/money.test.ts", "cli/cli.test.ts", "fuzz/fuzz.test.ts"])
  })
})
