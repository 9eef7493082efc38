/**
 * Where the request path makes new object maps (V8 hidden classes), by the code that made them:
 * runs `bench/hot-path.ts` with the gateway under `--log-maps` and counts the maps created per
 * request, grouped by function and source position.
 *
 * Why it matters: a `function*` written inside per-request code is a new generator closure per
 * request, and V8 gives each one its own initial map, in the old generation; the map points at the
 * closure, so the closure's whole scope (the request) survives every young-generation collection
 * until the next full GC. At 200 req/s that was 5–7 MB promoted per scavenge and 20–40 ms pauses.
 * Effect's own `Stream.onExit`/`ensuring`/`fromAsyncIterable` make such a closure per call
 * (`Channel.fromTransformBracket`). A healthy request path creates no maps per request: the lines
 * this prints should all be start-up counts (well under the number of requests).
 *
 *   node bench/map-sites.ts [--stream] [--redis] [--seconds 5] [--kind InitialMap] [--top 15]
 *
 * `--redis` runs the gateway in Redis mode (metering and capacity queues on the local Redis), whose
 * code is its own: two per-request generators hid there until 2026-12-02. The suite's
 * `test/runtime-http/generator-closures.test.ts` checks every dialect and backend in both modes.
 */
import { spawnSync } from "node:child_process"
import { mkdtempSync, readFileSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { parseArgs } from "node:util"

const { values } = parseArgs({
  options: {
    stream: { type: "boolean", default: false },
    redis: { type: "boolean", default: false },
    seconds: { type: "string", default: "5" },
    kind: { type: "string", default: "InitialMap" },
    top: { type: "string", default: "15" }
  }
})

const dir = mkdtempSync(join(tmpdir(), "map-sites-"))
const log = join(dir, "maps.log")
const run = spawnSync(process.execPath, [
  join(import.meta.dirname, "hot-path.ts"),
  "--seconds", values.seconds,
  "--c1", "20",
  ...(values.stream ? ["--stream"] : []),
  ...(values.redis ? ["--redis"] : []),
  `--node-args=--log-maps --logfile=${log} --no-logfile-per-isolate`
], { encoding: "utf8", stdio: ["ignore", "pipe", "inherit"] })
const summary = JSON.parse(run.stdout.trim().split("\n").at(-1) ?? "{}") as { requests?: number }
const requests = (summary.requests ?? 0) + 20

// code-creation,<type>,<kind>,<time>,<address>,<size>,<name…>  and  map,<kind>,<time>,<from>,<to>,<pc>,<line>,<column>,…
const codes: Array<readonly [number, number, string]> = []
const made: Array<readonly [number, string, string]> = []
for (const line of readFileSync(log, "utf8").split("\n")) {
  if (line.startsWith("code-creation,")) {
    const f = line.split(",")
    const start = Number.parseInt(f[4]!, 16)
    codes.push([start, start + Number(f[5]), f.slice(6).join(",").replace(/,0x[0-9a-f]+,.*$/, "").trim()])
  } else if (line.startsWith(`map,${values.kind},`)) {
    const f = line.split(",")
    made.push([Number.parseInt(f[5]!, 16), f[6]!, f[7]!])
  }
}
rmSync(dir, { recursive: true, force: true })
codes.sort((a, b) => a[0] - b[0])
const codeAt = (pc: number) => {
  let lo = 0
  let hi = codes.length - 1
  let best: readonly [number, number, string] | undefined
  while (lo <= hi) {
    const mid = (lo + hi) >> 1
    if (codes[mid]![0] <= pc) {
      best = codes[mid]
      lo = mid + 1
    } else hi = mid - 1
  }
  return best !== undefined && pc < best[1] ? best[2].replace(/file:\/\/\S*?\/(src|node_modules)\//, "$1/") : "(unknown code)"
}
const counts = new Map<string, number>()
for (const [pc, line, column] of made) {
  const site = `${codeAt(pc)} (at ${line}:${column})`
  counts.set(site, (counts.get(site) ?? 0) + 1)
}
console.log(`${made.length} ${values.kind} maps over ${requests} requests${values.stream ? " (streamed)" : ""}, start-up included; by the code that made them:`)
for (const [site, n] of [...counts].sort((a, b) => b[1] - a[1]).slice(0, Number(values.top))) {
  console.log(`${String(n).padStart(7)}  ${(n / requests).toFixed(2).padStart(6)}/req  ${site}`)
}
