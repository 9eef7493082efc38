/**
 * Memory per open stream, in about a minute (the streams suite opens 1,000 and reads RSS, which
 * moves with garbage and heap sizing as much as with what the streams hold). The gateway runs with
 * `--expose-gc` and bench/lib/heap-probe.ts; `--count` streaming Chat Completions are opened
 * against the simulator (first token after 300 ms, then 2 tokens/s: they stay open for minutes),
 * and the main thread's heap after a full collection is compared with the same figure before any
 * stream was opened: what is left is what the open streams hold. RSS is reported beside it. Then
 * the clients hang up and the heap is measured again: what the streams held must be gone (a leak
 * would stay).
 * `--snapshot=DIR` also writes heap snapshots (before and with the streams open) into DIR.
 * `--smaps` also reports the resident growth by kind of mapping (`/proc/PID/smaps`), and
 * `--node-args` passes flags to the gateway (e.g. `--max-semi-space-size=16`). `--prompt-kib N`
 * sends a user message of N KiB instead of one sentence: what a stream holds of its request shows.
 * `--tokens-per-second N` (default 2) and `--max-tokens N` (default 300) pace the streams: at 2 a
 * second they have a few tokens each when measured; faster, what a stream holds of the answer it
 * has sent so far shows. The simulator's answers are ~80 tokens long; `--deltas N` streams from the
 * fixed-answer upstream instead (this process, core 1): N content chunks at that pace, e.g.
 * `--deltas=3000 --tokens-per-second=50`: 200–450 chunks each by the time they are measured.
 * `--pause-after N` (with `--deltas`) has each stream stop after N content chunks and stay open, and
 * measures once the gateway's CPU is idle: what a stream holds once it has sent N chunks, without the
 * backlog of frames still being forwarded that a paced run measures beside it (1,000 streams at 50
 * tokens a second are more than two cores can forward).
 * `--anthropic` (with `--deltas`) has the gateway speak Anthropic's Messages API to the upstream (an
 * `anthropic` placement) instead of OpenAI's Chat Completions.
 * `--messages` opens Anthropic Messages streams (`/v1/messages`) instead of Chat Completions,
 * `--responses` OpenAI Responses streams (`/v1/responses`, `store: false`); with `--store`,
 * `store: true` (OpenAI's default when a client leaves it out): what a stream holds to store its
 * answer and its replay record at the end shows.
 * `--whole` opens non-streamed requests instead (each waits minutes for its answer): what a request
 * holds while it waits. `--bare` measures `bench/bare-proxy.ts` (node:http in, undici out, nothing
 * else) in the gateway's place: the floor every Node proxy pays per open stream (two sockets, their
 * parsers, an upstream connection).
 *
 * The RSS moves with V8's young generation as much as with what the streams hold: opening the
 * streams grows it to its cap (~95 MiB committed with Node 24's default 32 MiB semi-space), reported beside
 * the RSS; any sustained load does the same.
 *
 *   node bench/stream-memory.ts [--count=500] [--runs=2] [--snapshot=/tmp/snaps] [--smaps] [--node-args="…"] [--prompt-kib=0] [--whole] [--bare] [--tokens-per-second=2] [--max-tokens=300] [--deltas=N [--pause-after=N] [--anthropic]] [--messages | --responses [--store]]
 */
import { mkdtempSync, readFileSync } from "node:fs"
import { loadavg, tmpdir } from "node:os"
import { join } from "node:path"
import { parseArgs } from "node:util"
import { benchChatModel } from "./lib/catalog.ts"
import { readHeapProbe } from "./lib/heap-probe-reader.ts"
import { startFixedUpstream } from "./lib/fixed-upstream.ts"
import { makePool, openLoop, type Tracker } from "./lib/load.ts"
import { ROOT, randomToken, rssBytes, startBareProxy, startGateway, startSimulate, stopAll } from "./lib/procs.ts"

const { values } = parseArgs({
  options: { count: { type: "string", default: "500" }, runs: { type: "string", default: "2" }, snapshot: { type: "string" }, "prompt-kib": { type: "string", default: "0" }, whole: { type: "boolean", default: false }, "tokens-per-second": { type: "string", default: "2" }, "max-tokens": { type: "string", default: "300" }, deltas: { type: "string" }, "pause-after": { type: "string" }, anthropic: { type: "boolean", default: false }, messages: { type: "boolean", default: false }, responses: { type: "boolean", default: false }, store: { type: "boolean", default: false }, bare: { type: "boolean", default: false }, smaps: { type: "boolean", default: false }, "node-args": { type: "string", default: "" } }
})
const count = Number(values.count)
/** The streams' user message: one short sentence, or (`--prompt-kib`) about that many KiB of text, as a long conversation's last turn would be. */
const SENTENCE = "Write two sentences about a quiet harbor at dawn."
const prompt = Number(values["prompt-kib"]) > 0
  ? Array.from({ length: Math.ceil((Number(values["prompt-kib"]) * 1024) / 48) }, (_, i) => `Line ${i}: the tide turns and the boats rest. `).join("").slice(0, Number(values["prompt-kib"]) * 1024)
  : SENTENCE
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

interface Probe { readonly heapUsed: number; readonly external: number; readonly rss: number; readonly newSpaceCommitted: number }

/**
 * Resident KiB of a process by kind of mapping (`/proc/PID/smaps`): `[heap]` (glibc's main arena),
 * anonymous mappings (V8's heap pages, glibc's other arenas, thread stacks), and files.
 */
const residentByMapping = (pid: number): Map<string, number> => {
  const out = new Map<string, number>()
  let kind = ""
  for (const line of readFileSync(`/proc/${pid}/smaps`, "utf8").split("\n")) {
    const header = /^[0-9a-f]+-[0-9a-f]+ \S+ \S+ \S+ \S+\s*(.*)$/.exec(line)
    if (header !== null) {
      const name = header[1]!.trim()
      kind = name === "" ? "[anon]" : name.startsWith("/") ? "files" : name
      continue
    }
    const rss = /^Rss:\s+(\d+) kB/.exec(line)
    if (rss !== null) out.set(kind, (out.get(kind) ?? 0) + Number(rss[1]))
  }
  return out
}

/** CPU seconds (user + system) a process has used so far. */
const cpuSeconds = (pid: number): number => {
  const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ")
  return (Number(fields[11]) + Number(fields[12])) / 100
}

/** Waits (up to two minutes) until a process used under 5% of a core over half a second. */
const cpuIdle = async (pid: number) => {
  let last = cpuSeconds(pid)
  for (let i = 0; i < 240; i++) {
    await sleep(500)
    const now = cpuSeconds(pid)
    if (now - last < 0.025) return
    last = now
  }
}

const main = async () => {
  const logDir = mkdtempSync(join(tmpdir(), "bench-stream-memory-"))
  console.log(`logs in ${logDir}; load average ${loadavg().map((l) => l.toFixed(2)).join(" ")}`)
  const tokensPerSecond = Number(values["tokens-per-second"])
  const upstream = values.deltas === undefined
    ? await startSimulate(logDir, "upstream", 300, tokensPerSecond, 1)
    : await startFixedUpstream({ deltas: Number(values.deltas), ttftMs: 300, gapMs: Math.round(1000 / tokensPerSecond), ...(values["pause-after"] === undefined ? {} : { pauseAfter: Number(values["pause-after"]) }) }).then((fixed) => ({ url: fixed.url, stop: fixed.close }))
  const config = {
    models: [benchChatModel("svc-stream", "Stream memory", [
      { id: "stream-up", backend: values.anthropic ? "anthropic" : "openai-compatible", capacity: count * 4, baseUrl: `${upstream.url}/v1`, upstreamModel: "bench-stream" }
    ])],
    plans: { bench: { allowanceUsd: 1_000_000_000, rpm: 1_000_000_000, tpm: 1_000_000_000, concurrency: count * 4 } },
    defaultPlan: "bench"
  }
  try {
    for (let run = 1; run <= Number(values.runs); run++) {
      const nodeArgs = ["--expose-gc", "--import", join(ROOT, "bench", "lib", "heap-probe.ts"), ...values["node-args"].split(" ").filter((a) => a !== "")]
      const snapshotEnv: Record<string, string> = values.snapshot === undefined ? {} : { BENCH_HEAP_SNAPSHOT_DIR: values.snapshot }
      const gateway = values.bare
        ? { ...(await startBareProxy(logDir, 0, upstream.url, nodeArgs, "bare", { ...snapshotEnv, BARE_PROXY_CONNECTIONS: String(count * 2) })), createKey: async () => "sk-bench" }
        : await startGateway({ name: `gateway-${run}`, config, adminToken: randomToken(), logDir, cpu: 0, nodeArgs, env: snapshotEnv })
      const logFile = join(logDir, `${values.bare ? "bare-proxy" : `gateway-${run}`}.log`)
      const probe = async (): Promise<Probe> => {
        const report = await readHeapProbe(gateway.pid, logFile)
        if (report === undefined) throw new Error("heap-probe did not answer")
        if (!report.collected) throw new Error("heap-probe could not collect garbage (no --expose-gc?)")
        return { ...report, rss: rssBytes(gateway.pid) / 1048576 }
      }
      try {
        const key = await gateway.createKey("stream-memory", "bench")
        const pool = makePool(gateway.url, count + 50)
        const spec = (maxTokens: number) => () => ({
          pool,
          path: values.messages ? "/v1/messages" : values.responses ? "/v1/responses" : "/v1/chat/completions",
          headers: { "content-type": "application/json", authorization: `Bearer ${key}`, ...(values.messages ? { "anthropic-version": "2023-06-01" } : {}) },
          body: JSON.stringify(values.responses
            ? { model: "svc-stream", max_output_tokens: maxTokens, stream: !values.whole, store: values.store, input: prompt }
            : { model: "svc-stream", max_tokens: maxTokens, stream: !values.whole, messages: [{ role: "user", content: prompt }] })
        })
        // Warm-up: short streams, so every code path has run (and been compiled) once.
        await openLoop({ rate: 50, durationMs: 2_000, pick: spec(3), stream: true })
        await sleep(1_500)
        const before = await probe()
        const mappingsBefore = values.smaps ? residentByMapping(gateway.pid) : undefined
        const tracker: Tracker = { inFlight: 0, openStreams: 0 }
        void openLoop({ rate: count / 3, durationMs: 3_000, pick: spec(Number(values["max-tokens"])), stream: !values.whole, tracker })
        // A non-streamed request is open from when it is sent; give the last ones time to reach the upstream.
        const opened = () => (values.whole ? tracker.inFlight : tracker.openStreams)
        for (let i = 0; i < 150 && opened() < count; i++) await sleep(200)
        await sleep(values.whole ? 2_000 : 500)
        if (values["pause-after"] !== undefined) await cpuIdle(gateway.pid)
        const open = opened()
        const during = await probe()
        if (mappingsBefore !== undefined) {
          const now = residentByMapping(gateway.pid)
          const rows = [...now].map(([kind, kib]) => [kind, kib - (mappingsBefore.get(kind) ?? 0)] as const).filter(([, d]) => d !== 0).sort((a, b) => b[1] - a[1])
          console.log(`run ${run}: resident growth by mapping (KiB per open stream): ${rows.map(([kind, d]) => `${kind} ${(d / open).toFixed(1)}`).join(", ")}`)
        }
        const per = (k: keyof Probe) => ((during[k] - before[k]) * 1024 / open).toFixed(1)
        console.log(`run ${run}: ${open} ${values.whole ? "non-streamed requests waiting" : "streams open"}; heap after GC ${before.heapUsed.toFixed(1)} → ${during.heapUsed.toFixed(1)} MiB, ` +
          `RSS ${before.rss.toFixed(1)} → ${during.rss.toFixed(1)} MiB; per open stream: heap ${per("heapUsed")} KiB, external ${per("external")} KiB, ` +
          `RSS ${per("rss")} KiB, of which the young generation's growth ${per("newSpaceCommitted")} KiB (committed ${before.newSpaceCommitted.toFixed(1)} → ` +
          `${during.newSpaceCommitted.toFixed(1)} MiB) (load ${loadavg()[0]!.toFixed(2)})`)
        // The clients hang up: whatever the streams held must be garbage now (a leak stays here).
        await pool.destroy()
        await sleep(3_000)
        const after = await probe()
        console.log(`run ${run}: after the clients hung up, heap after GC ${after.heapUsed.toFixed(1)} MiB ` +
          `(${((after.heapUsed - before.heapUsed) * 1024 / open).toFixed(1)} KiB per stream left over), RSS ${after.rss.toFixed(1)} MiB`)
      } finally {
        await gateway.stop()
      }
    }
  } finally {
    await upstream.stop()
    await stopAll()
  }
}

await main()
