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
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { parseArgs } from "node:util"
import { readMapLogs } from "../test/support/v8-map-log.ts"

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
// One log per isolate (the main thread's, the database's and the tokenizer's workers): see
// `test/support/v8-map-log.ts` for why not one shared file.
const run = spawnSync(process.execPath, [
  join(import.meta.dirname, "hot-path.ts"),
  "--seconds", values.seconds,
  "--c1", "20",
  ...(values.stream ? ["--stream"] : []),
  ...(values.redis ? ["--redis"] : []),
  `--node-args=--log-maps --no-log-maps-details --logfile=${join(dir, "maps.log")}`
], { encoding: "utf8", stdio: ["ignore", "pipe", "inherit"] })
const summary = JSON.parse(run.stdout.trim().split("\n").at(-1) ?? "{}") as { requests?: number }
const requests = (summary.requests ?? 0) + 20

const maps = readMapLogs(dir, { kinds: [values.kind] })
rmSync(dir, { recursive: true, force: true })
console.log(`${maps.afterCount} ${values.kind} maps over ${requests} requests${values.stream ? " (streamed)" : ""}, start-up included; by the code that made them:`)
for (const [site, n] of [...maps.after].sort((a, b) => b[1] - a[1]).slice(0, Number(values.top))) {
  console.log(`${String(n).padStart(7)}  ${(n / requests).toFixed(2).padStart(6)}/req  ${site.slice(values.kind.length + 1)}`)
}
