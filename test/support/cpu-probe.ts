/**
 * Where a test run's CPU goes, file by file and test by test: a vitest setup file, loaded only when
 * `TEST_CPU_LOG` names a file (`vitest.config.ts`), that appends one tab-separated line per test and
 * one per file: the worker process's CPU seconds (user + system, every thread: the in-process
 * gateways and their database threads too), the CPU of the child processes it reaped meanwhile
 * (gateway processes, CLI runs), the wall seconds, and the name.
 *
 *   TEST_CPU_LOG=/tmp/cpu.tsv npx vitest run
 *   sort -t$'\t' -k2,2 -g -r /tmp/cpu.tsv | head -30
 *
 * Lines: `test|file`, cpu, children's cpu, wall, file, test name. Linux only (`/proc/self/stat`).
 * A file's line less the sum of its tests' is its hooks (gateways started and stopped, data dirs).
 */
import { appendFileSync, readFileSync } from "node:fs"
import { afterAll, afterEach, beforeAll, beforeEach, expect } from "vitest"

const log = process.env.TEST_CPU_LOG
const ticksPerSecond = 100

/** CPU seconds of this process and of the children it reaped (`/proc/self/stat` fields 14–17), and the time. */
const read = () => {
  const fields = readFileSync("/proc/self/stat", "utf8").split(") ")[1]!.split(" ")
  const ticks = (from: number) => Number(fields[from]) + Number(fields[from + 1])
  return { self: ticks(11) / ticksPerSecond, children: ticks(13) / ticksPerSecond, at: performance.now() }
}

const line = (kind: "test" | "file", since: ReturnType<typeof read>, name: string) => {
  const now = read()
  const file = (expect.getState().testPath ?? "?").replace(/.*\/test\//, "test/")
  appendFileSync(log!, `${kind}\t${(now.self - since.self).toFixed(2)}\t${(now.children - since.children).toFixed(2)}\t${((now.at - since.at) / 1000).toFixed(1)}\t${file}\t${name}\n`)
}

if (log !== undefined) {
  let fileStart = read()
  let testStart = fileStart
  beforeAll(() => {
    fileStart = read()
  })
  afterAll(() => line("file", fileStart, ""))
  beforeEach(() => {
    testStart = read()
  })
  afterEach((context) => line("test", testStart, context.task.name))
}
