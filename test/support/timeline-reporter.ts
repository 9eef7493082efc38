/**
 * A timeline of a test run, for finding where the run leaves cores idle: one line per file start
 * and end (seconds since the run began, the file, its duration), written as the run goes.
 * Beside `vmstat 1` it shows which files were running when the CPU was idle (docs/measurements.md,
 * "Test-suite time"). Not in the default reporters; ask for it:
 *
 *   npm test -- --reporter=default --reporter=./test/support/timeline-reporter.ts
 *
 * It writes `.cache/test-timeline.log`, or the file `TEST_TIMELINE` names.
 */
import { appendFileSync, mkdirSync, writeFileSync } from "node:fs"
import { dirname, join, relative } from "node:path"
import type { Reporter, TestModule } from "vitest/node"

const root = join(import.meta.dirname, "..", "..")
const out = process.env.TEST_TIMELINE ?? join(root, ".cache", "test-timeline.log")

export default class TimelineReporter implements Reporter {
  #startedAt = performance.now()

  #line(text: string) {
    appendFileSync(out, `${((performance.now() - this.#startedAt) / 1000).toFixed(1)} ${text}\n`)
  }

  onInit() {
    this.#startedAt = performance.now()
    mkdirSync(dirname(out), { recursive: true })
    writeFileSync(out, "")
    this.#line("init")
  }

  onTestModuleStart(module: TestModule) {
    this.#line(`start ${module.project.name} ${relative(root, module.moduleId)}`)
  }

  onTestModuleEnd(module: TestModule) {
    this.#line(`end ${module.project.name} ${relative(root, module.moduleId)} ${module.diagnostic().duration.toFixed(0)} ms`)
  }

  onTestRunEnd() {
    this.#line("run end")
  }
}
