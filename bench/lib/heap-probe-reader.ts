/**
 * The bench side of heap-probe.ts (which is preloaded into the process under test, so it cannot be
 * imported here): sends the process SIGUSR2 and waits for the new `heap-probe {…}` line in its log
 * file. The log is read from the file, not from the captured output, which is capped.
 */
import { readFileSync } from "node:fs"

/** What one probe reports (MiB), as heap-probe.ts writes it. */
export interface HeapProbeReport {
  /** False when the process has no `gc` (started without `--expose-gc`): the figures include garbage. */
  readonly collected: boolean
  readonly rss: number
  readonly heapUsed: number
  readonly heapTotal: number
  readonly external: number
  readonly arrayBuffers: number
  readonly newSpaceCommitted: number
}

const probeLines = (logFile: string) => readFileSync(logFile, "utf8").match(/heap-probe \{.*\}/g) ?? []

/** Asks `pid` for a heap report and waits up to `timeoutMs` for it; undefined if none came. */
export const readHeapProbe = async (pid: number, logFile: string, timeoutMs = 60_000): Promise<HeapProbeReport | undefined> => {
  const seen = probeLines(logFile).length
  process.kill(pid, "SIGUSR2")
  for (let waited = 0; waited < timeoutMs; waited += 50) {
    await new Promise((resolve) => setTimeout(resolve, 50))
    const lines = probeLines(logFile)
    if (lines.length > seen) return JSON.parse(lines[lines.length - 1]!.slice("heap-probe ".length)) as HeapProbeReport
  }
  return undefined
}
