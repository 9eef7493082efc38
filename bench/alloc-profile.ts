/**
 * Bytes allocated per request, by function: the gateway (`node --inspect`) in front of the
 * fixed-answer upstream, warmed up, then V8's sampling heap profiler (collected objects included,
 * so it counts every allocation, not what survives) over N requests sent a few at a time. Unlike
 * CPU figures, allocation counts hardly move with the machine's load, so a change to the request
 * path can be judged on a busy machine; fewer bytes per request means fewer scavenges (GC time on
 * the main thread and V8's helper threads, and the loop pauses they cause).
 *
 *   node bench/alloc-profile.ts [--requests 2000] [--rate R] [--stream] [--deltas 16] [--top 40] [--depth 1] [--redis] [--anthropic] [--survivors | --retained] [--env NAME=VALUE]…
 *
 * `--survivors` counts only objects that outlived a young-generation collection (scavenge): each
 * is copied, so these bytes, not the total, set how long a scavenge pauses the loop.
 *
 * `--rate R` sends the requests open loop at R per second instead of one after another: with
 * `--survivors`, what outlives scavenges at that rate (at ~1 s between scavenges, mostly what is
 * promoted to the old generation), which sequential requests, rarely in flight at a scavenge,
 * do not show.
 *
 * Prints the total KiB per request, then the top functions by self bytes (per request), and the
 * same grouped by file.
 */
import { mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { parseArgs } from "node:util"
import { fixedUpstreamConfig } from "./lib/catalog.ts"
import { startFixedUpstream } from "./lib/fixed-upstream.ts"
import { makePool, openLoop, sequential, statuses } from "./lib/load.ts"
import { randomToken, startGateway, stopAll, envPairs } from "./lib/procs.ts"

const { values } = parseArgs({
  options: {
    requests: { type: "string", default: "2000" },
    stream: { type: "boolean", default: false },
    top: { type: "string", default: "40" },
    /** Callers shown for each entry (1: the function itself; 4: who called it, three levels up). */
    depth: { type: "string", default: "1" },
    redis: { type: "boolean", default: false },
    /** The placement speaks Anthropic's Messages API to the fixed-answer upstream (the anthropic backend). */
    anthropic: { type: "boolean", default: false },
    /**
     * Only what survived a young-generation collection (promoted to the old generation, dead or
     * not by now): what makes scavenges slow — each survivor is copied, twice if promoted.
     */
    survivors: { type: "boolean", default: false },
    /**
     * Only what is still reachable when the requests end (a full GC first): what a request leaves
     * behind — for seconds (timers, pools, buffers awaiting a flush) or for good. Objects living
     * longer than a scavenge interval (~2 s at 200 req/s) are promoted and copied; they set the
     * young-generation pauses.
     */
    retained: { type: "boolean", default: false },
    /** Content chunks per streamed answer: the per-frame cost is (bytes at N1 − bytes at N2) / (N1 − N2). */
    deltas: { type: "string", default: "16" },
    rate: { type: "string" },
    env: { type: "string", multiple: true, default: [] }
  }
})

interface ProfileNode {
  readonly callFrame: { readonly functionName: string; readonly url: string; readonly lineNumber: number }
  readonly selfSize: number
  readonly children: ReadonlyArray<ProfileNode>
}

/**
 * Run in the gateway before a `--survivors` profile is read: ~300 MB of short-lived arrays (4
 * million of six slots), far more than a semi-space, so every scavenge-able object of the requests
 * is scavenged. Its own samples (the last semi-space of them, not yet scavenged) are left out of
 * the figures by name.
 */
const FLUSH_FUNCTION = "flushYoungGeneration"
const FLUSH_YOUNG_GENERATION = `(function ${FLUSH_FUNCTION}() { let keep; for (let i = 0; i < 4_000_000; i++) keep = new Array(6); return keep.length })()`

/** A minimal Chrome DevTools Protocol client over the inspector's WebSocket. */
const connect = async (wsUrl: string) => {
  const socket = new WebSocket(wsUrl)
  await new Promise((resolve, reject) => {
    socket.onopen = resolve
    socket.onerror = reject
  })
  let nextId = 0
  const pending = new Map<number, (result: unknown) => void>()
  socket.onmessage = (event) => {
    const message = JSON.parse(String(event.data)) as { id?: number; result?: unknown; error?: unknown }
    if (message.id !== undefined) pending.get(message.id)?.(message.error ?? message.result)
  }
  return {
    send: <A>(method: string, params: Record<string, unknown> = {}) =>
      new Promise<A>((resolve) => {
        const id = ++nextId
        pending.set(id, resolve as (result: unknown) => void)
        socket.send(JSON.stringify({ id, method, params }))
      }),
    close: () => socket.close()
  }
}

const inspectPort = 9300 + Math.floor(Math.random() * 500)
const logDir = mkdtempSync(join(tmpdir(), "alloc-profile-"))
const upstream = await startFixedUpstream({ deltas: Number(values.deltas), gapMs: 0 })
const extraEnv = envPairs(values.env)
const gateway = await startGateway({
  name: "gateway",
  config: fixedUpstreamConfig(upstream.url, values.anthropic ? "anthropic" : "openai-compatible"),
  adminToken: randomToken(),
  logDir,
  cpu: 0,
  nodeArgs: [`--inspect=127.0.0.1:${inspectPort}`],
  env: {
    ...(values.redis ? { REDIS_URL: "redis://127.0.0.1:6379", GATEWAY_REDIS_PREFIX: `alloc-${randomToken(4)}:` } : {}),
    ...extraEnv
  }
})
try {
  const key = await gateway.createKey("bench", "bench")
  const pool = makePool(gateway.url, 8)
  const spec = {
    pool,
    path: "/v1/chat/completions",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    body: JSON.stringify({ model: "svc-bench", max_tokens: Math.max(32, Number(values.deltas) + 8), messages: [{ role: "user", content: "Write two sentences about a quiet harbor at dawn." }], ...(values.stream ? { stream: true } : {}) })
  }
  await sequential(500, () => spec, values.stream) // warm-up: JIT, caches, pools
  const targets = (await (await fetch(`http://127.0.0.1:${inspectPort}/json/list`)).json()) as Array<{ webSocketDebuggerUrl: string }>
  const cdp = await connect(targets[0]!.webSocketDebuggerUrl)
  await cdp.send("HeapProfiler.enable")
  await cdp.send("HeapProfiler.startSampling", {
    samplingInterval: 256,
    includeObjectsCollectedByMajorGC: !values.retained,
    includeObjectsCollectedByMinorGC: !values.survivors && !values.retained
  })
  const requests = Number(values.requests)
  const done = values.rate === undefined
    ? await sequential(requests, () => spec, values.stream)
    : (await openLoop({ rate: Number(values.rate), durationMs: (requests * 1000) / Number(values.rate), pick: () => spec, stream: values.stream })).samples
  if (values.retained) await cdp.send("HeapProfiler.collectGarbage")
  // The sampler drops an object's sample only when a collection frees it, so without this the
  // requests' garbage made since the last scavenge (up to a semi-space of it) would count as
  // survivors: the short-lived arrays allocated there push all of it through scavenges.
  if (values.survivors) await cdp.send("Runtime.evaluate", { expression: FLUSH_YOUNG_GENERATION })
  const { profile } = await cdp.send<{ profile: { head: ProfileNode } }>("HeapProfiler.stopSampling")
  cdp.close()

  const bySelf = new Map<string, number>()
  const byFile = new Map<string, number>()
  let total = 0
  const nameOf = (node: ProfileNode) => {
    const { functionName, url, lineNumber } = node.callFrame
    const file = url.replace(/^.*node_modules\//, "nm/").replace(/^file:\/\/.*?\/(src|bench|machines)\//, "$1/") || "(native)"
    return { file, name: `${functionName || "(anonymous)"} ${file}:${lineNumber + 1}` }
  }
  // A builtin (Map.set, an iterator's next, …) is charged to the JS function that called it.
  const depth = Number(values.depth)
  const walk = (node: ProfileNode, callers: ReadonlyArray<string>) => {
    if (node.callFrame.functionName === FLUSH_FUNCTION) return
    const { file, name: own } = nameOf(node)
    const chain = file === "(native)" ? [own, ...callers.slice(0, Math.max(1, depth - 1))] : [own, ...callers.slice(0, depth - 1)]
    const name = chain.join(" ← ")
    bySelf.set(name, (bySelf.get(name) ?? 0) + node.selfSize)
    byFile.set(file, (byFile.get(file) ?? 0) + node.selfSize)
    total += node.selfSize
    for (const child of node.children) walk(child, [own, ...callers].slice(0, 8))
  }
  walk(profile.head, [])
  const kib = (bytes: number) => (bytes / requests / 1024).toFixed(2).padStart(8)
  console.log(`${done.length} requests${values.stream ? " (streamed)" : ""}: ${kib(total).trim()} KiB ${values.retained ? "still reachable at the end" : "allocated"} per request (sampled every 256 bytes)`)
  // A change that makes requests fail also makes them allocate less: say so before any figure is read.
  const failed = done.filter((sample) => sample.status !== 200).length
  if (failed > 0) {
    console.log(`WARNING: ${failed} of ${done.length} requests were not answered 200 (${JSON.stringify(statuses(done))}): these are not a served request's figures`)
    process.exitCode = 1
  }
  const top = Number(values.top)
  console.log("\nKiB/request  function")
  for (const [name, bytes] of [...bySelf].sort((a, b) => b[1] - a[1]).slice(0, top)) console.log(`${kib(bytes)}  ${name}`)
  console.log("\nKiB/request  file")
  for (const [name, bytes] of [...byFile].sort((a, b) => b[1] - a[1]).slice(0, 25)) console.log(`${kib(bytes)}  ${name}`)
  await pool.close()
} finally {
  await gateway.stop()
  await upstream.close()
  await stopAll()
}
