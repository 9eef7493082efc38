/**
 * A request's median timeline, from `lib/timeline-probe.ts`'s record of a gateway under
 * `bench/hot-path.ts --timeline FILE` (printed there at the end; or `node bench/request-timeline.ts FILE`).
 *
 * Only back-to-back requests count (the c=1 phase: the next one arrives within `--gap-ms` of the
 * previous answer's end, and none overlaps another), after the first `--skip`. For each step — the
 * n-th occurrence of an event within its request, e.g. `redis-send:evalsha#1` — it prints the median
 * time since the request's head arrived, and how much of that the event loop spent idle (waiting in
 * its poll phase) and busy. A span where idle grows is a wait (Redis, the upstream, the client); a
 * span where it stands still is the gateway's own work on the request's critical path. Steps seen in
 * fewer than half the requests (a previous request's late reply, say) are listed apart.
 */
import { readFileSync } from "node:fs"
import { parseArgs } from "node:util"
import { breakdownOf, type PerfSample } from "./lib/perf-record.ts"
import type { TimelineEvent } from "./lib/timeline-probe.ts"

export interface TimelineStep {
  readonly step: string
  readonly atUs: number
  readonly idleUs: number
  /** How many of the requests had this step. */
  readonly seen: number
}

/** The back-to-back requests in a timeline record, each as its events from its head to its `finish`. */
export const backToBack = (events: ReadonlyArray<TimelineEvent>, gapMs: number): Array<Array<TimelineEvent>> => {
  const requests: Array<Array<TimelineEvent>> = []
  let open: number | undefined
  let depth = 0
  let lastFinish = -Infinity
  for (let i = 0; i < events.length; i++) {
    const [at, what] = events[i]!
    if (what === "in") {
      depth++
      open = depth === 1 && at - lastFinish <= gapMs * 1000 ? i : undefined
    } else if (what === "finish") {
      depth = Math.max(0, depth - 1)
      if (depth === 0) {
        if (open !== undefined) requests.push(events.slice(open, i + 1))
        open = undefined
        lastFinish = at
      }
    }
  }
  return requests
}

const median = (xs: Array<number>) => xs.sort((a, b) => a - b)[xs.length >> 1]!

/** Each request's steps as `what#n` labels, with their times and idle since the request's head. */
const labelled = (request: ReadonlyArray<TimelineEvent>) => {
  const count = new Map<string, number>()
  const [t0, , idle0] = request[0]!
  return request.map(([at, what, idle]) => {
    const n = (count.get(what) ?? 0) + 1
    count.set(what, n)
    return { step: `${what}#${n}`, atUs: at - t0, idleUs: idle - idle0, at }
  })
}

/** The spans between a request's consecutive steps: `a#1 → b#1`, how long, how much of it idle, and when (hrtime µs). */
const spansOf = (steps: ReturnType<typeof labelled>) =>
  steps.slice(1).map((b, i) => {
    const a = steps[i]!
    return { span: `${a.step} → ${b.step}`, us: b.atUs - a.atUs, idle: b.idleUs - a.idleUs, from: a.at, to: b.at }
  })

/** Median time and idle of each step since its request's head, over `requests`. */
export const medianTimeline = (requests: ReadonlyArray<ReadonlyArray<TimelineEvent>>): Array<TimelineStep> => {
  const steps = new Map<string, { at: Array<number>; idle: Array<number> }>()
  for (const request of requests) {
    for (const { step, atUs, idleUs } of labelled(request)) {
      const entry = steps.get(step) ?? steps.set(step, { at: [], idle: [] }).get(step)!
      entry.at.push(atUs)
      entry.idle.push(idleUs)
    }
  }
  return [...steps].map(([step, { at, idle }]) => ({ step, atUs: median(at), idleUs: median(idle), seen: at.length }))
    .sort((a, b) => a.atUs - b.atUs)
}

export const printTimeline = (
  events: ReadonlyArray<TimelineEvent>,
  options: { readonly skip?: number; readonly gapMs?: number; readonly samples?: ReadonlyArray<PerfSample> | undefined } = {}
) => {
  const requests = backToBack(events, options.gapMs ?? 2).slice(options.skip ?? 100)
  if (requests.length === 0) {
    console.log("timeline: no back-to-back requests recorded")
    return
  }
  const steps = medianTimeline(requests)
  const common = steps.filter((s) => s.seen * 2 >= requests.length)
  console.log(`timeline: median of ${requests.length} back-to-back requests (µs since the request's head; idle = the loop waiting)`)
  console.log(`${"step".padEnd(26)} ${"at".padStart(6)} ${"idle".padStart(6)} ${"busy".padStart(6)}`)
  let previous: TimelineStep | undefined
  for (const s of common) {
    const span = previous === undefined ? "" : `   +${s.atUs - previous.atUs} (idle +${Math.max(0, Math.round(s.idleUs - previous.idleUs))})`
    console.log(`${s.step.padEnd(26)} ${String(s.atUs).padStart(6)} ${String(Math.round(s.idleUs)).padStart(6)} ${String(Math.round(s.atUs - s.idleUs)).padStart(6)}${span}`)
    previous = s
  }
  const rare = steps.filter((s) => s.seen * 2 < requests.length)
  if (rare.length > 0) console.log(`seen in fewer than half: ${rare.map((s) => `${s.step} (${s.seen}) at ${s.atUs}`).join(", ")}`)
  if (options.samples !== undefined) printSpanProfile(requests, options.samples)
  printTail(requests, options.samples)
}

/** The samples (sorted by time) taken in [from, to). */
const samplesIn = (sorted: ReadonlyArray<PerfSample>, from: number, to: number): ReadonlyArray<PerfSample> => {
  let lo = 0
  let hi = sorted.length
  while (lo < hi) {
    const mid = (lo + hi) >> 1
    if (sorted[mid]!.atUs < from) lo = mid + 1
    else hi = mid
  }
  let end = lo
  while (end < sorted.length && sorted[end]!.atUs < to) end++
  return sorted.slice(lo, end)
}

/**
 * The slowest 1% of the requests (head to the answer's end): which spans made them slow — each
 * span's median over all requests against its mean over the slow ones, and how much of the excess
 * the loop spent idle (a wait: the upstream, Redis, the core taken by another thread) or busy (work
 * on the loop: a collection, a timer's task, another request's). With perf samples, whose code ran
 * in the slow requests' spans.
 */
const printTail = (requests: ReadonlyArray<ReadonlyArray<TimelineEvent>>, samples: ReadonlyArray<PerfSample> | undefined) => {
  const all = requests.map(labelled)
  const endOf = (steps: ReturnType<typeof labelled>) => (steps.find((s) => s.step === "res-end#1") ?? steps[steps.length - 1]!).atUs
  const order = all.map((steps, i) => [endOf(steps), i] as const).sort((a, b) => a[0] - b[0])
  const tail = order.slice(Math.floor(order.length * 0.99))
  if (tail.length < 3) return
  const medians = new Map<string, Array<number>>()
  for (const steps of all) for (const { span, us } of spansOf(steps)) (medians.get(span) ?? medians.set(span, []).get(span)!).push(us)
  const slow = new Map<string, { us: number; idle: number; samples: Array<PerfSample> }>()
  const sorted = samples === undefined ? [] : [...samples].sort((a, b) => a.atUs - b.atUs)
  for (const [, i] of tail) {
    for (const t of spansOf(all[i]!)) {
      const span = t.span
      const entry = slow.get(span) ?? slow.set(span, { us: 0, idle: 0, samples: [] }).get(span)!
      entry.us += t.us / tail.length
      entry.idle += t.idle / tail.length
      entry.samples.push(...samplesIn(sorted, t.from, t.to))
    }
  }
  const p50 = order[order.length >> 1]![0]
  console.log(`\nthe slowest ${tail.length} of ${order.length} (head → answer's end ${tail[0]![0]}–${tail[tail.length - 1]![0]} µs; median ${p50}): spans by excess over their median`)
  const rows = [...slow].map(([span, e]) => ({ span, ...e, median: median(medians.get(span) ?? [0]) })).sort((a, b) => (b.us - b.median) - (a.us - a.median))
  for (const row of rows.slice(0, 6)) {
    if (row.us - row.median < 20) break
    console.log(`${row.span.padEnd(44)} median ${String(row.median).padStart(6)}  slow mean ${row.us.toFixed(0).padStart(6)} (idle ${row.idle.toFixed(0)})`)
    if (row.samples.length > 0) {
      const b = breakdownOf(row.samples, 6)
      const us = row.samples.reduce((sum, s) => sum + s.periodUs, 0) / tail.length
      console.log(`   perf: ~${us.toFixed(0)} µs per slow request — ${b.self.map(([name, share]) => `${name} ${(share * us).toFixed(0)}`).join("; ")}`)
    }
  }
}

/**
 * The perf samples (`hot-path --perf DIR --perf-c1`) laid on the requests' steps: for each span
 * between two steps of a request (and the time between requests), how much of the main thread's
 * time the samples saw there per request, and where it went. A span's busy time on the timeline is
 * what it costs; this says whose code that is.
 */
const printSpanProfile = (requests: ReadonlyArray<ReadonlyArray<TimelineEvent>>, samples: ReadonlyArray<PerfSample>) => {
  const sorted = [...samples].sort((a, b) => a.atUs - b.atUs)
  const spans = new Map<string, Array<PerfSample>>()
  const add = (span: string, list: ReadonlyArray<PerfSample>) => (spans.get(span) ?? spans.set(span, []).get(span)!).push(...list)
  requests.forEach((request, r) => {
    const steps = labelled(request)
    for (const { span, from, to } of spansOf(steps)) add(span, samplesIn(sorted, from, to))
    // From this request's last step to the next one's head.
    const next = requests[r + 1]?.[0]?.[0]
    if (next !== undefined) add("(between requests)", samplesIn(sorted, steps[steps.length - 1]!.at, next))
  })
  const cpuUs = (list: ReadonlyArray<PerfSample>) => list.reduce((sum, s) => sum + s.periodUs, 0)
  const top = Number(process.env.PERF_TOP ?? 8)
  console.log(`\nperf over the c=1 phase: ${sorted.length} samples of the main thread, ${(cpuUs(sorted) / 1000).toFixed(0)} ms of its CPU`)
  for (const [span, list] of [...spans].sort((a, b) => cpuUs(b[1]) - cpuUs(a[1]))) {
    const usPerRequest = cpuUs(list) / requests.length
    if (usPerRequest < 3) continue
    const b = breakdownOf(list, top)
    const us = (share: number) => (share * usPerRequest).toFixed(0)
    console.log(`${span}: ~${usPerRequest.toFixed(0)} µs per request — ${Object.entries(b.areas).map(([area, share]) => `${area} ${us(share)}`).join(", ")}`)
    for (const [name, share] of b.self) console.log(`   ${us(share).padStart(4)} µs  ${name}`)
    const src = b.inclusive.slice(0, 6)
    if (src.length > 0) console.log(`   gateway functions on the stack: ${src.map(([name, share]) => `${name} ${us(share)}`).join("; ")}`)
  }
}

if (import.meta.main) {
  const { values, positionals } = parseArgs({
    allowPositionals: true,
    options: { skip: { type: "string", default: "100" }, "gap-ms": { type: "string", default: "2" } }
  })
  const file = positionals[0]
  if (file === undefined) throw new Error("usage: node bench/request-timeline.ts FILE [--skip 100] [--gap-ms 2]")
  printTimeline(JSON.parse(readFileSync(file, "utf8")) as Array<TimelineEvent>, { skip: Number(values.skip), gapMs: Number(values["gap-ms"]) })
}
