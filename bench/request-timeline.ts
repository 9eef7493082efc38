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

/** Median time and idle of each step since its request's head, over `requests`. */
export const medianTimeline = (requests: ReadonlyArray<ReadonlyArray<TimelineEvent>>): Array<TimelineStep> => {
  const steps = new Map<string, { at: Array<number>; idle: Array<number> }>()
  for (const request of requests) {
    const [t0, , idle0] = request[0]!
    const count = new Map<string, number>()
    for (const [at, what, idle] of request) {
      const n = (count.get(what) ?? 0) + 1
      count.set(what, n)
      const step = `${what}#${n}`
      const entry = steps.get(step) ?? steps.set(step, { at: [], idle: [] }).get(step)!
      entry.at.push(at - t0)
      entry.idle.push(idle - idle0)
    }
  }
  return [...steps].map(([step, { at, idle }]) => ({ step, atUs: median(at), idleUs: median(idle), seen: at.length }))
    .sort((a, b) => a.atUs - b.atUs)
}

export const printTimeline = (events: ReadonlyArray<TimelineEvent>, options: { readonly skip?: number; readonly gapMs?: number } = {}) => {
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
