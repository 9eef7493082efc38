/**
 * The order files start in when vitest has no durations of its own: the long files first.
 *
 * Vitest starts the files that took longest in its last run first (their durations are in its
 * cache, `node_modules/.vite/vitest/…/results.json`). A clean clone has no cache: CI's run, a new
 * contributor's first. Vitest then starts the largest files first, and file size says little about
 * duration here. The fuzz suite and the CLI suite take 35–60 s each, much of it spent waiting on
 * gateway processes of their own. They started at ~110 s of a 159 s run (2026-11-30), ran on
 * after most other files had finished, and in the run's last ~20 s a third of the two cores sat
 * idle (vmstat).
 *
 * This sequencer keeps vitest's order (projects, groups, its cached durations) and moves the files
 * named below to the front of their project, longest first — only those vitest has no duration
 * for, so once it has run here its own measure decides. The list is a hint, not a contract: a file
 * missing from it or a stale entry only changes when a file starts (a test checks that every entry
 * names a file). A custom sequencer replaces vitest's random one, so `--sequence.shuffle` shuffles
 * the tests inside each file but no longer the order of the files.
 */
import { BaseSequencer, type TestSpecification } from "vitest/node"

/**
 * Paths under `test/`, longest first: the files that took 12 s or more in one of three full runs
 * (2026-11-30), and the generator-closures suite (~21 s alone since 2026-12-02: two gateways
 * under V8's map log, and batches, runs and uploads served 13 rounds each).
 */
export const LONG_FILES: ReadonlyArray<string> = [
  "fuzz/fuzz.test.ts",
  "cli/cli.test.ts",
  "runtime-http/generator-closures.test.ts",
  "runtime-http/allowance-redis-loss.test.ts",
  "artifacts/artifacts-http.test.ts",
  "dashboard/browser.test.ts",
  "storage/embedded-database.test.ts",
  "artifacts/content-parser.test.ts",
  "runs/recovery.test.ts",
  "runtime/redis-queues-model.test.ts",
  "artifacts/query-property.test.ts",
  "fuzz/hostile-upstream.test.ts",
  "batches/batch-recovery.test.ts",
  "runs/charges.test.ts",
  "http/send-timeout.test.ts",
  "http/graceful-shutdown.test.ts",
  "runtime-http/stream-hold.test.ts",
  "http/memory-trim.test.ts",
  "runtime-http/model-permissions.test.ts",
  "http/unstorable-input.test.ts",
  "runs/redis-outage.test.ts",
  "http/robustness.test.ts",
  "batches/message-batches.test.ts",
  "runtime-http/capacity.test.ts",
  "runs/run-log-model.test.ts",
  "storage/embedded-thread.test.ts",
  "dashboard/dashboard-api.test.ts",
  "runtime/redis-capacity-queues.test.ts",
  "runtime-http/ledger-durability.test.ts"
]

/** Where `moduleId` stands in LONG_FILES; files not named come after every named one. */
const rankOf = (moduleId: string) => {
  const normalized = moduleId.replaceAll("\\", "/")
  const index = LONG_FILES.findIndex((path) => normalized.endsWith(`/test/${path}`))
  return index === -1 ? LONG_FILES.length : index
}

export default class LongFilesFirst extends BaseSequencer {
  override async sort(files: Array<TestSpecification>): Promise<Array<TestSpecification>> {
    const sorted = await super.sort(files)
    const cache = this.ctx.cache
    // Each file's place in vitest's order, and where its project's files begin in that order.
    const position = new Map(sorted.map((spec, index) => [spec, index]))
    const projectStart = new Map<unknown, number>()
    sorted.forEach((spec, index) => {
      if (!projectStart.has(spec.project)) projectStart.set(spec.project, index)
    })
    // A file vitest has a duration for keeps its place: only files without one are moved.
    const rank = (spec: TestSpecification) =>
      cache.getTestSpecificationResult(spec) === undefined ? rankOf(spec.moduleId) : LONG_FILES.length
    const start = (spec: TestSpecification) => projectStart.get(spec.project) ?? 0
    const at = (spec: TestSpecification) => position.get(spec) ?? 0
    return [...sorted].sort((a, b) => start(a) - start(b) || rank(a) - rank(b) || at(a) - at(b))
  }
}
