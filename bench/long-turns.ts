/**
 * What ran inside each long turn of the event loop: reads `lib/turn-probe.ts`'s report and the
 * main thread's `--cpu-prof` profile from the same process, aligns the two clocks on the probe's
 * marker, and prints, per turn of at least `--min-ms`, the functions with the most self time and
 * the heaviest callers under it.
 *
 *   node --import bench/lib/turn-probe.ts --cpu-prof --cpu-prof-dir=DIR --cpu-prof-interval=200 src/main.ts serve …
 *   node bench/long-turns.ts DIR [--min-ms 20] [--turns FILE]
 *
 * Found this way (2026-11-30): the sliced serializer held a 15.5 Mi-character string for one turn
 * of 140–390 ms (it read the clock every 256 pieces, and each slice of a long string is a piece).
 */
import { readdirSync, readFileSync, statSync } from "node:fs"
import { join } from "node:path"
import { parseArgs } from "node:util"
import { TURNS_FILE, type TurnProbeReport } from "./lib/turn-probe.ts"

interface ProfileNode {
  readonly id: number
  readonly callFrame: { readonly functionName: string; readonly url: string; readonly lineNumber: number }
  readonly children?: ReadonlyArray<number>
}
interface Profile {
  readonly nodes: ReadonlyArray<ProfileNode>
  readonly startTime: number
  readonly samples: ReadonlyArray<number>
  readonly timeDeltas: ReadonlyArray<number>
}

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: { "min-ms": { type: "string", default: "20" }, turns: { type: "string", default: TURNS_FILE } }
})
const dir = positionals[0]
if (dir === undefined) throw new Error("usage: node bench/long-turns.ts PROFILE_DIR [--min-ms 20] [--turns FILE]")
const report = JSON.parse(readFileSync(values.turns, "utf8")) as TurnProbeReport
// The largest profile with the marker: `serve` replaces itself once at start (process-settings.ts),
// and the process it replaced leaves a short profile of its own (the probe's report is the last one's).
const mainThread = readdirSync(dir).map((file) => join(dir, file))
  .filter((file) => readFileSync(file, "utf8").includes("__turnProbeMarker"))
  .sort((a, b) => statSync(b).size - statSync(a).size)[0]
if (mainThread === undefined) throw new Error(`no profile in ${dir} holds the probe's marker (was the process started with lib/turn-probe.ts?)`)
const profile = JSON.parse(readFileSync(mainThread, "utf8")) as Profile

const byId = new Map(profile.nodes.map((node) => [node.id, node]))
const parent = new Map<number, number>()
for (const node of profile.nodes) for (const child of node.children ?? []) parent.set(child, node.id)
const name = (id: number) => {
  const frame = byId.get(id)!.callFrame
  return `${frame.functionName || "(anonymous)"} ${frame.url.split("/").slice(-2).join("/")}:${frame.lineNumber + 1}`
}
const times: Array<number> = []
let t = profile.startTime
for (const delta of profile.timeDeltas) times.push((t += delta))
const markerIndex = profile.samples.findIndex((sample) => {
  for (let id: number | undefined = sample; id !== undefined; id = parent.get(id)) if (byId.get(id)!.callFrame.functionName === "__turnProbeMarker") return true
  return false
})
if (markerIndex < 0) throw new Error("the marker was not sampled")
const offset = report.markerAt - times[markerIndex]!

const top = (totals: Map<string, number>, n: number) => [...totals].sort((a, b) => b[1] - a[1]).slice(0, n).map(([key, us]) => `${(us / 1000).toFixed(1).padStart(7)} ms  ${key}`)
for (const turn of report.long.filter((turn) => turn.ms >= Number(values["min-ms"]))) {
  const from = turn.start - offset
  const to = from + turn.ms * 1000
  const self = new Map<string, number>()
  const inclusive = new Map<string, number>()
  for (let i = 0; i < profile.samples.length; i++) {
    if (times[i]! < from || times[i]! > to) continue
    const us = profile.timeDeltas[i + 1] ?? 0
    const sample = profile.samples[i]!
    self.set(name(sample), (self.get(name(sample)) ?? 0) + us)
    const seen = new Set<string>()
    for (let id: number | undefined = sample; id !== undefined; id = parent.get(id)) {
      const key = name(id)
      // Effect's run loop and node's callback plumbing wrap every turn: left out, they would top every list.
      const url = byId.get(id)!.callFrame.url
      if (seen.has(key) || url.includes("/node_modules/effect/") || url.startsWith("node:internal/") || key.startsWith("(root)")) continue
      seen.add(key)
      inclusive.set(key, (inclusive.get(key) ?? 0) + us)
    }
  }
  console.log(`\n== ${turn.type} turn of ${turn.ms.toFixed(1)} ms`)
  console.log(" self:\n" + top(self, 8).join("\n"))
  console.log(" inclusive:\n" + top(inclusive, 12).join("\n"))
}
