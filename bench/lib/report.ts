/** The Markdown summary and SVG charts of one benchmark run. */
import { writeFileSync } from "node:fs"
import { join } from "node:path"
import type { OverheadResult } from "../suites/overhead.ts"
import type { QueueingResult } from "../suites/queueing.ts"
import type { SoakResult } from "../suites/soak.ts"
import type { StreamsResult } from "../suites/streams.ts"
import type { Profile } from "./profile.ts"
import { median } from "./stats.ts"
import { barChart, lineChart } from "./svg.ts"

export interface BenchResult {
  readonly profile: string
  readonly startedAt: string
  readonly elapsedSeconds: number
  readonly machine: { nproc: number; cpuModel: string; memoryGiB: number; kernel: string; loadAverageAtStart: number[]; loadAverageAtEnd: number[] }
  readonly pinning: Record<string, string>
  readonly versions: Record<string, string | boolean | null>
  readonly settings: Profile
  readonly errors: ReadonlyArray<string>
  readonly overhead: OverheadResult | null
  readonly queueing: QueueingResult | null
  readonly streams: StreamsResult | null
  readonly soak?: SoakResult | null
}

const us = (v: number | undefined | null) => (v === undefined || v === null || !Number.isFinite(v) ? "–" : Math.round(v).toLocaleString("en-US"))
const ms = (v: number | undefined | null, digits = 2) => (v === undefined || v === null || !Number.isFinite(v) ? "–" : v.toFixed(digits))
const signedUs = (v: number | undefined | null) => (v === undefined || v === null || !Number.isFinite(v) ? "–" : `${v >= 0 ? "+" : "−"}${Math.round(Math.abs(v)).toLocaleString("en-US")}`)
const pct = (v: number) => (Number.isFinite(v) ? `${(v * 100).toFixed(1)}%` : "–")
const table = (head: ReadonlyArray<string>, rows: ReadonlyArray<ReadonlyArray<string>>) =>
  [`| ${head.join(" | ")} |`, `|${head.map((_, i) => (i === 0 ? "---" : "---:")).join("|")}|`, ...rows.map((r) => `| ${r.join(" | ")} |`)].join("\n")

/** Writes `<stamp>.md` and its charts into `dir`; returns the Markdown file's path. */
export const writeReport = (r: BenchResult, dir: string, stamp: string): string => {
  const chart = (name: string, svg: string) => {
    const file = `${stamp}-${name}.svg`
    writeFileSync(join(dir, file), `${svg}\n`)
    return file
  }
  const out: string[] = []
  const o = r.overhead
  const q = r.queueing
  const s = r.streams
  out.push(`# Load benchmark — ${r.startedAt.slice(0, 16).replace("T", " ")} UTC (${r.profile})`)
  out.push("")
  if (r.profile === "quick") {
    out.push("> **Smoke check (`--quick`)**: short runs, few rates; the figures show the rig works, not what the gateway can do. Run `npm run bench` on a quiet machine for real figures.")
    out.push("")
  }
  const load = r.machine.loadAverageAtStart[0] ?? 0
  out.push(`Machine: ${r.machine.nproc} cores (${r.machine.cpuModel}), ${r.machine.memoryGiB} GiB, Linux ${r.machine.kernel}; load average ${load.toFixed(2)} at the start, ${(r.machine.loadAverageAtEnd[0] ?? Number.NaN).toFixed(2)} at the end${load > 0.5 ? " — **not idle: figures are noisy**" : ""}. ` +
    `Node ${r.versions.node}, gateway ${r.versions.gateway} (${String(r.versions.gitCommit ?? "?").slice(0, 10)}${r.versions.gitDirty ? ", uncommitted changes in src/" : ""}), ` +
    `Portkey ${r.versions.portkey ?? "–"} (@hono/node-server ${r.versions.honoNodeServer ?? "–"}), undici ${r.versions.undici}, PostgreSQL ${r.versions.postgres ?? "–"}, Redis ${r.versions.redis ?? "–"}. ` +
    `Servers under test pinned to core 0 from their start, generator and upstream simulator to core 1 (\`taskset\`). Median of ${r.settings.runs} runs after a warm-up. Took ${Math.round(r.elapsedSeconds / 60 * 10) / 10} min. Raw figures: [\`${stamp}.json\`](${stamp}.json).`)
  out.push("")
  const notes = [...r.errors, ...(o?.notes ?? []), ...(q?.notes ?? [])]
  if (notes.length > 0) {
    out.push("**Did not run / problems:**")
    for (const n of notes) out.push(`- ${n}`)
    out.push("")
  }

  // ── Headline: CPU per request at 200 req/s, ours against Portkey ─────────────────────────────
  if (o !== null) {
    const at = (arm: string, rate: number) => o.median[arm]?.rates.find((x) => x.rate === rate)
    const headlineRate = 200
    const ours = at("gateway", headlineRate)
    const portkey = at("portkey", headlineRate)
    out.push(`## Headline: CPU per non-streamed request at ${headlineRate} req/s`)
    out.push("")
    out.push(table(
      ["arm", "CPU µs/req", "× Portkey", "event-loop delay p99 µs", "added p50 µs (c=1)", "added p99 µs (c=1)"],
      o.arms.filter((arm) => arm !== "direct").map((arm) => {
        const point = at(arm, headlineRate)
        return [
          `**${arm}**`,
          us(point?.cpuUsPerRequest),
          portkey === undefined || point === undefined ? "–" : (point.cpuUsPerRequest / portkey.cpuUsPerRequest).toFixed(2),
          us(point?.loopP99Us),
          signedUs(o.added[arm]?.c1P50Us),
          signedUs(o.added[arm]?.c1P99Us)
        ]
      })
    ))
    out.push("")
    if (ours !== undefined && portkey !== undefined) {
      out.push(`Our gateway spends **${us(ours.cpuUsPerRequest)} µs** of CPU per request against Portkey's ${us(portkey.cpuUsPerRequest)} (${(ours.cpuUsPerRequest / portkey.cpuUsPerRequest).toFixed(2)}×), metering on, embedded database; the direct arm's figure is the fixed-answer upstream's own cost.`)
      out.push("")
    }
    const bare = at("bare-proxy", headlineRate)
    if (ours !== undefined && bare !== undefined) {
      out.push(`\`bare-proxy\` (node:http in, undici out, nothing else: \`bench/bare-proxy.ts\`) is the floor any Node proxy pays here: ${us(bare.cpuUsPerRequest)} µs. The gateway's own work is the rest, ${us(ours.cpuUsPerRequest - bare.cpuUsPerRequest)} µs${portkey === undefined ? "" : ` (Portkey's: ${us(portkey.cpuUsPerRequest - bare.cpuUsPerRequest)} µs)`}.`)
      out.push("")
    }
    const floor = at("floor-proxy", headlineRate)
    if (ours !== undefined && floor !== undefined) {
      out.push(`\`floor-proxy\` (the bare proxy plus the least a translating, metering gateway must do per request — key lookup, both bodies parsed and re-encoded, a hold, a log line — in plain code: \`bench/floor-proxy.ts\`) is a yardstick, not a gateway: ${us(floor.cpuUsPerRequest)} µs${portkey === undefined ? "" : ` (${(floor.cpuUsPerRequest / portkey.cpuUsPerRequest).toFixed(2)}× Portkey)`}. What our gateway spends beyond it, ${us(ours.cpuUsPerRequest - floor.cpuUsPerRequest)} µs, is its own structure (queues, typed errors, the ledger, metrics, failover).`)
      out.push("")
    }
  }

  // ── Comparison table ────────────────────────────────────────────────────────────────────────
  if (o !== null) {
    const refRate = pickReferenceRate(o)
    out.push("## Comparison")
    out.push("")
    out.push(`Added = the arm's figure minus the direct arm's (same upstream, same load). "Max req/s": closed loop, ${r.settings.overhead.saturateWorkers} concurrent. CPU: the arm's server process (utime+stime) per answered request at ${refRate} req/s.`)
    out.push("")
    out.push(table(
      ["arm", "c=1 p50 µs", "c=1 p99 µs", "added p50 µs", "added p99 µs", "max req/s", "rig check", "highest rate, added p99 < 5 ms", `CPU µs/req`, "added TTFT p50 µs", "added chunk gap p50 µs"],
      o.arms.map((arm) => {
        const m = o.median[arm]!
        const a = o.added[arm]
        const rc = o.rigCheck[arm]
        const cpu = m.rates.find((x) => x.rate === refRate)?.cpuUsPerRequest
        return [
          `**${arm}**`,
          us(m.c1.p50),
          us(m.c1.p99),
          a === undefined ? "—" : signedUs(a.c1P50Us),
          a === undefined ? "—" : signedUs(a.c1P99Us),
          us(o.saturation[arm]?.rps),
          rc === undefined ? "(reference)" : `${rc.ok ? "ok" : "**rig-bound**"} (direct ${rc.directOverArm.toFixed(1)}×)`,
          a === undefined ? "—" : a.maxRateP99Under5ms === null ? `below ${Math.min(...m.rates.map((x) => x.rate))} req/s` : `${a.maxRateP99Under5ms} req/s${a.maxRateP99Under5ms === Math.max(...m.rates.map((x) => x.rate)) ? " (highest tested)" : ""}`,
          us(cpu),
          a === undefined ? "—" : signedUs(a.streamC1.ttftP50Us),
          a === undefined ? "—" : signedUs(a.streamC1.gapP50Us)
        ]
      })
    ))
    out.push("")
    const bound = Object.entries(o.rigCheck).filter(([, v]) => !v.ok).map(([k]) => k)
    out.push(bound.length === 0
      ? "Rig check: the direct arm answers at least 3× as many requests per second as every proxy arm, so the proxies, not the rig, set their limits."
      : `Rig check: **rig-bound** for ${bound.join(", ")} — the direct arm is less than 3× as fast, so the generator and upstream (core 1) may limit these arms; their rate figures understate what the proxy can do.`)
    out.push("")
  }

  // ── 1. Overhead ─────────────────────────────────────────────────────────────────────────────
  if (o !== null) {
    out.push("## 1. Overhead: direct vs our gateway vs Portkey")
    out.push("")
    out.push(`Upstream: a minimal fixed-answer node:http server (\`bench/lib/fixed-upstream.ts\`) answering at once; non-streamed Chat Completions, \`max_tokens\` 32. Latency at concurrency 1 is one request after another (${r.settings.overhead.c1Requests} per run); at fixed rates it is open loop for ${r.settings.overhead.rateMs / 1000} s per rate, measured from each request's scheduled start.`)
    out.push("")
    out.push(table(["arm", "p50 µs", "p90 µs", "p99 µs", "p99.9 µs", "max µs"], o.arms.map((arm) => {
      const d = o.median[arm]!.c1
      return [arm, us(d.p50), us(d.p90), us(d.p99), us(d.p999), us(d.max)]
    })))
    out.push("")
    const c1Chart = chart("latency-c1", barChart({
      title: "Latency at concurrency 1 (median of runs)",
      yLabel: "µs (log)",
      log: true,
      categories: ["p50", "p90", "p99", "p99.9"],
      series: o.arms.map((arm) => {
        const d = o.median[arm]!.c1
        return { name: arm, values: [d.p50, d.p90, d.p99, d.p999] }
      })
    }))
    out.push(`![latency percentiles at concurrency 1](${c1Chart})`)
    out.push("")
    const rates = [...new Set(o.arms.flatMap((arm) => o.median[arm]!.rates.map((x) => x.rate)))].sort((a, b) => a - b)
    out.push("Fixed rates — p50 / p99 latency in ms (answered req/s; ⚠ = fewer than 95% of the offered rate answered, or failures):")
    out.push("")
    out.push(table(["offered req/s", ...o.arms], rates.map((rate) => [String(rate), ...o.arms.map((arm) => {
      const x = o.median[arm]!.rates.find((y) => y.rate === rate)
      if (x === undefined) return "skipped (above capacity)"
      const warn = x.achievedRps < rate * 0.95 || x.non200 > 0 ? " ⚠" : ""
      return `${ms(x.latencyUs.p50 / 1000)} / ${ms(x.latencyUs.p99 / 1000)} (${Math.round(x.achievedRps)})${warn}`
    })])))
    out.push("")
    const proxies = o.arms.filter((a) => a !== "direct")
    out.push("Added latency over direct at each rate — p50 / p99 in µs:")
    out.push("")
    out.push(table(["offered req/s", ...proxies], rates.map((rate) => [String(rate), ...proxies.map((arm) => {
      const x = o.added[arm]!.rates.find((y) => y.rate === rate)
      return x === undefined ? "–" : `${signedUs(x.p50Us)} / ${signedUs(x.p99Us)}`
    })])))
    out.push("")
    const rateChart = chart("latency-rate", lineChart({
      title: "p99 latency vs offered rate (open loop, median of runs)",
      xLabel: "offered requests/s",
      yLabel: "p99 latency, ms (log)",
      log: true,
      series: o.arms.map((arm) => ({ name: arm, points: o.median[arm]!.rates.map((x) => [x.rate, x.latencyUs.p99 / 1000] as const) }))
    }))
    out.push(`![p99 latency vs offered rate](${rateChart})`)
    out.push("")
    out.push(`Generator send lag p99 (how late requests left the generator, included in every arm's latency; µs): ${o.median["direct"]!.rates.map((x) => `${x.rate}: ${us(x.sendLagP99Us)}`).join(", ")} (direct arm). Lag in the milliseconds means the generator's core (shared with the upstream) was busy, and p99 differences of that size are within the rig's noise.`)
    out.push("")
    out.push(`Server CPU per answered request (µs, utime+stime of the arm's server ÷ answers; direct = the upstream simulator itself):`)
    out.push("")
    out.push(table(["offered req/s", ...o.arms], rates.map((rate) => [String(rate), ...o.arms.map((arm) => us(o.median[arm]!.rates.find((y) => y.rate === rate)?.cpuUsPerRequest))])))
    out.push("")
    out.push(`Streams: upstream first token after ${o.upstream.stream.ttftMs} ms, then a content delta every ${o.upstream.stream.gapMs} ms (16 deltas). TTFT = scheduled start → first content delta; gap = time between consecutive content deltas as the client receives them. Concurrency 1 (${r.settings.overhead.streamC1} per run) and open loop at ${r.settings.overhead.streamRate} streams/s.`)
    out.push("")
    out.push(table(["arm", "TTFT p50 µs", "TTFT p99 µs", "added TTFT p50 / p99", "gap p50 µs", "gap p99 µs", "added gap p50 / p99", `@${r.settings.overhead.streamRate}/s added TTFT p50 / p99`, `@${r.settings.overhead.streamRate}/s added gap p50 / p99`], o.arms.map((arm) => {
      const m = o.median[arm]!
      const a = o.added[arm]
      return [
        arm,
        us(m.streamC1.firstTokenUs?.p50),
        us(m.streamC1.firstTokenUs?.p99),
        a === undefined ? "—" : `${signedUs(a.streamC1.ttftP50Us)} / ${signedUs(a.streamC1.ttftP99Us)}`,
        us(m.streamC1.gapUs?.p50),
        us(m.streamC1.gapUs?.p99),
        a === undefined ? "—" : `${signedUs(a.streamC1.gapP50Us)} / ${signedUs(a.streamC1.gapP99Us)}`,
        a === undefined ? "—" : `${signedUs(a.streamRate.ttftP50Us)} / ${signedUs(a.streamRate.ttftP99Us)}`,
        a === undefined ? "—" : `${signedUs(a.streamRate.gapP50Us)} / ${signedUs(a.streamRate.gapP99Us)}`
      ]
    })))
    out.push("")
    if (o.arms.every((arm) => o.median[arm]?.streamCpu !== undefined)) {
      const extra = o.median[o.arms[0]!]!.streamCpu!.extraFrames
      out.push(`CPU of the arm's server per streamed answer at ${r.settings.overhead.streamRate} streams/s, with 16 content deltas and with ${16 + extra}, and per SSE frame = the difference ÷ ${extra} (each delta arrives on its own, 5 ms apart; direct = the upstream's own cost):`)
      out.push("")
      out.push(table(["arm", "CPU µs / 16-delta stream", `CPU µs / ${16 + extra}-delta stream`, "CPU µs per SSE frame"], o.arms.map((arm) => {
        const c = o.median[arm]!.streamCpu!
        return [arm, us(c.perStreamUs), us(c.perLongStreamUs), c.perFrameUs.toFixed(1)]
      })))
      out.push("")
    }
    if (o.arms.includes("portkey")) {
      out.push("Portkey's streams run on a second Portkey process with one global restored (see `bench/portkey-server.ts`): stock Portkey 1.15.2 answers every streamed request with 500 here (`TypeError: immutable` from @hono/node-server's lightweight `Response`); its non-streamed figures come from the stock process.")
      out.push("")
    }
  }

  // ── 2. Queueing ─────────────────────────────────────────────────────────────────────────────
  if (q !== null && q.setups.length > 0) {
    out.push("## 2. Queueing under overload")
    out.push("")
    const first = q.setups[0]!
    out.push(`One simulator placement with capacity ${first.capacity} and a fixed latency of ${first.serviceMs} ms (measured unloaded: ${ms(first.measuredServiceMs, 1)} ms), offered 2× its capacity for ${r.settings.queueing.offerMs / 1000} s, open loop, by four keys: A sends 70%, B, C and D 10% each. Fair share = max-min fair allocation of the capacity over the keys' demands (B–D ask less than a quarter, so they are owed all they ask; A the rest). Throughput counts answers that finished while every key was still sending. Wait = latency − measured service time. Jain's index over throughput ÷ fair share (1 = exactly fair).`)
    out.push("")
    for (const setup of q.setups) {
      const m = setup.median
      out.push(`### ${setup.setup}`)
      out.push("")
      out.push(`429s: **${m.total429}** (other non-200: ${m.totalNon200 - m.total429}). Jain's index: **${m.jain.toFixed(3)}** (over raw throughputs: ${m.jainRaw.toFixed(3)}). Maximum queue depth: **${m.maxQueueDepth}** (GET /admin/v1/queues every ${r.settings.queueing.pollMs} ms). RSS${setup.instances > 1 ? ` (sum of ${setup.instances} instances)` : ""}: ${ms(m.rssIdleMiB, 1)} MiB before → **${ms(m.rssMaxQueuedMiB, 1)} MiB** at most while queued.`)
      out.push("")
      out.push(table(["key", "offered share", "fair share", "throughput share", "share ÷ fair", "wait p50 ms", "wait p99 ms", "most waiting", "429s"], m.keys.map((k) => [
        k.key, pct(k.offeredShare), pct(k.fairShare), pct(k.throughputShare), (k.throughputShare / k.fairShare).toFixed(2), ms(k.waitP50Ms, 0), ms(k.waitP99Ms, 0), String(k.maxWaiting), String(k.count429)
      ])))
      out.push("")
    }
    const waitChart = chart("queue-wait", barChart({
      title: "Queue wait per key under 2× overload (median of runs)",
      yLabel: "wait, ms (log)",
      log: true,
      categories: q.setups[0]!.median.keys.map((k) => `${k.key} (${pct(k.offeredShare)})`),
      series: q.setups.flatMap((setup) => [
        { name: `${setup.instances === 1 ? "1 inst" : `${setup.instances} inst`} p50`, values: setup.median.keys.map((k) => Math.max(1, k.waitP50Ms)) },
        { name: `${setup.instances === 1 ? "1 inst" : `${setup.instances} inst`} p99`, values: setup.median.keys.map((k) => Math.max(1, k.waitP99Ms)) }
      ])
    }))
    out.push(`![queue wait per key](${waitChart})`)
    out.push("")
  }

  // ── 3. Streams and memory ───────────────────────────────────────────────────────────────────
  if (s !== null) {
    out.push("## 3. Streams and memory")
    out.push("")
    out.push(`${s.count} streamed Chat Completions opened over ${r.settings.streams.rampMs / 1000} s through one gateway (embedded database) to a paced upstream (first token ${s.upstream.ttftMs} ms, 3 tokens every ${Math.round(3000 / s.upstream.tokensPerSecond)} ms, ${s.upstream.maxTokens} tokens; a stream lasts ~${ms(s.median.streamSeconds, 1)} s). RSS = VmRSS of the gateway process.`)
    out.push("")
    out.push(table(["", "value"], [
      ["RSS right after start", `${ms(s.rssFreshMiB, 1)} MiB`],
      [
        `**RSS idle after start**, once quiet (the gateway's memory trim, here after ${(s.quietTrimMs ?? 8_000) / 1000} s), before any request`,
        s.rssQuietStartMiB === undefined ? "– (no trim within the wait)" : `**${ms(s.rssQuietStartMiB, 1)} MiB**`
      ],
      ["RSS idle (after warm-up)", `${ms(s.rssIdleMiB, 1)} MiB`],
      [`RSS with ${s.median.maxOpenStreams} streams open at once`, `**${ms(s.median.rssAtPeakStreamsMiB, 1)} MiB** (peak ${ms(s.median.rssPeakMiB, 1)} MiB)`],
      [`RSS ${r.settings.streams.settleMs / 1000} s after the load ended`, `${ms(s.median.rssAfterMiB, 1)} MiB`],
      ["RSS before → peak → after, each run", s.runs.map((x) => `${x.rssBeforeMiB.toFixed(0)} → ${x.rssPeakMiB.toFixed(0)} → ${x.rssAfterMiB.toFixed(0)}`).join("; ") + " MiB"],
      ["memory per open stream (median over runs of (RSS with all open − RSS before the run) ÷ streams)", `${ms(median(s.runs.map((x) => ((x.rssAtPeakStreamsMiB - x.rssBeforeMiB) * 1024) / Math.max(1, x.maxOpenStreams))), 1)} KiB`],
      [
        "**heap per open stream** (one more run: the main thread's heap, used + external, after a full collection with every stream open − before the run, ÷ streams; RSS moves with garbage and heap sizing, this does not)",
        s.heapPerOpenStreamKiB === undefined ? "– (not measured)" : `**${ms(s.heapPerOpenStreamKiB, 1)} KiB**`
      ],
      [
        `RSS once quiet after the last run (the gateway's memory trim, here after ${(s.quietTrimMs ?? 8_000) / 1000} s: \`GATEWAY_IDLE_TRIM_MS=${s.quietTrimMs ?? 8_000}\`)`,
        s.rssQuietMiB === undefined ? "– (no trim within the wait)" : `${ms(s.rssQuietMiB, 1)} MiB`
      ],
      ["CPU time per streamed request", `**${us(s.median.cpuUsPerRequest)} µs**`],
      ["failed streams", String(s.median.non200)]
    ]))
    out.push("")
  }

  // ── 4. Metering cost ────────────────────────────────────────────────────────────────────────
  if (o !== null && o.arms.includes("gateway")) {
    const names = ["gateway-unmetered", "gateway", "gateway+redis"].filter((name) => o.arms.includes(name))
    const base = o.median[names[0]!]!
    out.push("## 4. Metering cost: without checks, in process, on Redis")
    out.push("")
    out.push("`gateway-unmetered` runs with `GATEWAY_METERING=off` (no rate-limit admission, no allowance reservation; usage is still priced and recorded in the ledger); `gateway` checks both in process; `gateway+redis` checks them with Lua scripts on Redis (rate windows, allowance reservation, and the capacity lease too). Differences are against the first column.")
    out.push("")
    const rates = base.rates.map((x) => x.rate).filter((rate) => names.every((name) => o.median[name]!.rates.some((y) => y.rate === rate)))
    const cell = (value: number, ref: number, isBase: boolean) => (isBase ? us(value) : `${us(value)} (${signedUs(value - ref)})`)
    const row = (label: string, pick: (name: string) => number) => {
      const ref = pick(names[0]!)
      return [label, ...names.map((name, i) => cell(pick(name), ref, i === 0))]
    }
    out.push(table(["", ...names], [
      row("c=1 p50 µs", (name) => o.median[name]!.c1.p50),
      row("c=1 p99 µs", (name) => o.median[name]!.c1.p99),
      row("max req/s (closed loop)", (name) => o.saturation[name]?.rps ?? Number.NaN),
      ...rates.flatMap((rate) => [
        row(`p99 µs @ ${rate} req/s`, (name) => o.median[name]!.rates.find((x) => x.rate === rate)!.latencyUs.p99),
        row(`CPU µs/req @ ${rate} req/s`, (name) => o.median[name]!.rates.find((x) => x.rate === rate)!.cpuUsPerRequest)
      ])
    ]))
    out.push("")
  }

  // ── Soak ──────────────────────────────────────────────────────────────────────────────────
  const soak = r.soak
  if (soak !== undefined && soak !== null) {
    out.push(`## Sustained load: ${soak.rate} req/s for ${soak.minutes.length} min`)
    out.push("")
    out.push(`One gateway (embedded database, metering on) against the fixed-answer upstream, one row per minute. Last minute ÷ first: CPU ${soak.drift.cpu.toFixed(2)}×, p99 ${soak.drift.p99.toFixed(2)}×, RSS ${soak.drift.rss.toFixed(2)}×.`)
    out.push("")
    out.push(table(
      ["minute", "answered", "failed", "CPU µs/req", "p50 µs", "p99 µs", "loop delay p99 µs", "RSS MiB"],
      soak.minutes.map((m) => [String(m.minute), us(m.answered), us(m.failed), us(m.cpuUsPerRequest), us(m.p50Us), us(m.p99Us), us(m.loopP99Us), us(m.rssMiB)])
    ))
    out.push("")
  }

  out.push("## Method")
  out.push("")
  out.push("- **Load tool**: an open-loop, constant-rate scheduler on undici's `Pool` (`bench/lib/load.ts`). Request *i* is due at t0 + i/rate whatever happened before, and latency is measured from that scheduled time, so a stalled server is charged for the requests that queue behind it (no coordinated omission). autocannon's rate mode is closed loop per connection (a late answer delays the next send, unmeasured) and wrk2 is not in Debian (wrk is closed loop), so neither fits. The generator's send lag is recorded in the JSON.")
  out.push("- **Pinning**: servers under test (our gateway, Portkey) on core 0; generator and upstream simulator on core 1; PostgreSQL and Redis unpinned.")
  out.push("- **Runs**: every arm is warmed up first; each figure is the median over runs of that run's statistic (e.g. the median of three p99s); arms are interleaved with the order rotated per run.")
  out.push("- **Rig check**: the direct arm's closed-loop maximum must be ≥ 3× each proxy arm's, else that arm is marked rig-bound.")
  out.push("- **Memory** is VmRSS from /proc/<pid>/status; **CPU** is utime+stime from /proc/<pid>/stat (10 ms ticks, so per-request figures need many requests).")
  out.push("")
  const file = join(dir, `${stamp}.md`)
  writeFileSync(file, `${out.join("\n")}\n`)
  return file
}

/** The rate the comparison table quotes CPU at: the highest rate every arm ran without saturating. */
const pickReferenceRate = (o: OverheadResult): number => {
  const common = o.median[o.arms[0]!]!.rates.map((x) => x.rate).filter((rate) =>
    o.arms.every((arm) => {
      const x = o.median[arm]!.rates.find((y) => y.rate === rate)
      return x !== undefined && x.achievedRps >= rate * 0.95
    })
  )
  return common.length === 0 ? o.median[o.arms[0]!]!.rates[0]!.rate : Math.max(...common)
}
