/**
 * Before/after on one machine in one run: two checkouts' gateways side by side (each the code of
 * its own tree: `git worktree add /tmp/base <rev>` and a `node_modules` symlink), against the same
 * fixed-answer upstreams, interleaved round by round (the order flipped each round), medians over
 * rounds. Per checkout: c=1 latency of non-streamed requests, CPU µs per request at 200 req/s, and
 * time to first token of c=1 streams (upstream: first token after 20 ms, then a delta every 5 ms).
 * With two checkouts it also prints each figure's round-by-round difference and a sign test: on
 * VMs whose figures swing from one minute to the next, the medians alone can mislead.
 * `npm run bench` compares against Portkey; this compares a change against what it changed.
 *
 *   node bench/ab.ts /tmp/base /work/main [--rounds 5] [--redis]
 */
import { mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { parseArgs } from "node:util"
import { fixedUpstreamConfig } from "./lib/catalog.ts"
import { startFixedUpstream } from "./lib/fixed-upstream.ts"
import { makePool, openLoop, sequential, summarize } from "./lib/load.ts"
import { cpuMicros, pin, randomToken, stopAll } from "./lib/procs.ts"

const { values, positionals } = parseArgs({ allowPositionals: true, options: { redis: { type: "boolean", default: false }, rounds: { type: "string", default: "3" } } })
pin(process.pid, 1)
const logDir = mkdtempSync(join(tmpdir(), "ab-"))
const json = await startFixedUpstream({ deltas: 16 })
const streamUp = await startFixedUpstream({ deltas: 16, ttftMs: 20, gapMs: 5 })
const arms = []
for (const [i, root] of positionals.entries()) {
  const procs = await import(join(root, "bench/lib/procs.ts"))
  const start = async (name: string, url: string) => procs.startGateway({ name: `${name}-${i}`, config: fixedUpstreamConfig(url), adminToken: randomToken(), logDir, cpu: 0,
    env: values.redis ? { REDIS_URL: "redis://127.0.0.1:6379", GATEWAY_REDIS_PREFIX: `ab-${randomToken(4)}:` } : {} })
  const g = await start("json", json.url)
  const s = await start("stream", streamUp.url)
  arms.push({ root, g, s, keyG: await g.createKey("bench", "bench"), keyS: await s.createKey("bench", "bench"), res: [] as Array<Record<string, number>> })
}
const specFor = (url: string, key: string, stream: boolean) => ({
  pool: makePool(url, 64), path: "/v1/chat/completions",
  headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
  body: JSON.stringify({ model: "svc-bench", max_tokens: 40, messages: [{ role: "user", content: "Write two sentences about a quiet harbor at dawn." }], ...(stream ? { stream: true } : {}) })
})
for (const a of arms) { const sp = specFor(a.g.url, a.keyG, false); await openLoop({ rate: 200, durationMs: 3000, pick: () => sp }); const ss = specFor(a.s.url, a.keyS, true); await sequential(50, () => ss, true) }
for (let r = 0; r < Number(values.rounds); r++) {
  for (const a of (r % 2 === 0 ? arms : [...arms].reverse())) {
    const sp = specFor(a.g.url, a.keyG, false)
    const c1 = summarize(await sequential(400, () => sp))
    const cpu0 = cpuMicros(a.g.pid)
    const run = await openLoop({ rate: 200, durationMs: 5000, pick: () => sp }); const rate = summarize(run.samples, run.t0)
    const cpu = (cpuMicros(a.g.pid) - cpu0) / rate.ok
    const ss = specFor(a.s.url, a.keyS, true)
    const st = summarize(await sequential(150, () => ss, true))
    a.res.push({ c1p50: c1.latencyUs.p50, c1p99: c1.latencyUs.p99, rateP50: rate.latencyUs.p50, rateP99: rate.latencyUs.p99, cpu, ttftP50: st.firstTokenUs!.p50, ttftP99: st.firstTokenUs!.p99 })
  }
}
const med = (xs: number[]) => [...xs].sort((x, y) => x - y)[Math.floor(xs.length / 2)]!
for (const a of arms) {
  const keys = Object.keys(a.res[0]!)
  console.log(a.root, JSON.stringify(Object.fromEntries(keys.map((k) => [k, Math.round(med(a.res.map((r) => r[k]!)))]))))
  console.log(`  rounds: cpu ${a.res.map((r) => Math.round(r.cpu!)).join(", ")}; c1p50 ${a.res.map((r) => Math.round(r.c1p50!)).join(", ")}; c1p99 ${a.res.map((r) => Math.round(r.c1p99!)).join(", ")}; rateP99 ${a.res.map((r) => Math.round(r.rateP99!)).join(", ")}`)
}
// Paired by round: the two arms ran back to back in each round (the order flipped each round), so
// a round's difference cancels what the VM did meanwhile, which here swings a run's figures ~2×
// from one minute to the next. The sign test asks how often the second arm came out lower than
// the first: a p-value under ~0.05 says the difference is more than the order of the rounds.
if (arms.length === 2) {
  const [a, b] = arms
  const n = Math.min(a.res.length, b.res.length)
  // Two-sided, ties dropped: the chance of a split at least this uneven if either arm were as likely lower.
  const signTest = (lower: number, higher: number) => {
    const m = lower + higher
    let choose = 1
    let p = 0
    for (let k = 0; k <= Math.min(lower, higher); k++) {
      p += choose / 2 ** m
      choose = (choose * (m - k)) / (k + 1)
    }
    return Math.min(1, 2 * p)
  }
  console.log(`paired, ${b.root} − ${a.root}, over ${n} rounds:`)
  for (const key of Object.keys(a.res[0]!)) {
    const diffs = Array.from({ length: n }, (_, i) => b.res[i]![key]! - a.res[i]![key]!)
    const lower = diffs.filter((d) => d < 0).length
    const higher = diffs.filter((d) => d > 0).length
    console.log(`  ${key}: median ${Math.round(med(diffs))} (${diffs.map((d) => Math.round(d)).join(", ")}); lower in ${lower} of ${n}, sign test p = ${signTest(lower, higher).toFixed(2)}`)
  }
}
await stopAll()
for (const a of arms) { try { const p = await import(join(a.root, "bench/lib/procs.ts")); await p.stopAll() } catch {} }
process.exit(0)
