/**
 * Where a process's main thread spends its CPU, sampled by Linux `perf` (Debian's linux-perf)
 * rather than V8's `--cpu-prof`.
 *
 * Why: V8's profiler marks the event loop "idle" from libuv's prepare phase to its check phase,
 * and every native frame run from the poll phase (socket reads, llhttp, the kernel's TCP work)
 * lands in "(idle)". On this machine a `--cpu-prof` of the gateway at 200 req/s showed ~300 µs of
 * busy time per request while the scheduler (`/proc/…/schedstat`) counted ~1,200. perf samples the
 * thread wherever it is (kernel included), and with the V8 flags below it names JIT code through a
 * jitdump that perf maps by time, so code moved or freed by the GC is not misnamed (the simpler
 * `--perf-basic-prof` map is: it named an address reused by other code).
 *
 * Use: start the process with `perfNodeArgs(dir)`, call `recordThread` for the window to measure,
 * then `perfBreakdown` to read it.
 */
import { spawn, spawnSync } from "node:child_process"
import { readdirSync, rmSync } from "node:fs"
import { join } from "node:path"

/**
 * V8 flags that write a jitdump (`jit-<pid>.dump`) into `dir` for `perf inject --jit`. `--perf-prof`
 * also turns on V8's log, one `isolate-…-v8.log` per isolate (the main thread and every worker):
 * `--logfile` puts them in `dir` too, not in the gateway's working directory (the checkout).
 */
export const perfNodeArgs = (dir: string) => ["--perf-prof", "--perf-prof-unwinding-info", `--perf-prof-path=${dir}`, `--logfile=${join(dir, "v8.log")}`]

/** Starts sampling one thread (its tid; a process's main thread has the pid) at `hz`; stop() ends it. */
export const recordThread = (tid: number, dir: string, hz = 2_000) => {
  const child = spawn("perf", ["record", "-k", "1", "-e", "cpu-clock", "-F", String(hz), "-g", "-t", String(tid), "-o", join(dir, "perf.data")], {
    stdio: ["ignore", "ignore", "pipe"]
  })
  let stderr = ""
  child.stderr.on("data", (chunk) => (stderr += chunk))
  const exited = new Promise<number | null>((resolve) => child.on("exit", (code, signal) => resolve(signal === "SIGINT" ? 0 : code)))
  return {
    stop: async () => {
      child.kill("SIGINT")
      const code = await exited
      if (code !== 0) throw new Error(`perf record exited with ${code}: ${stderr.trim()}`)
    }
  }
}

export interface PerfBreakdown {
  readonly samples: number
  /** Share of the samples by where the innermost named frame lies (see `areaOf`). */
  readonly areas: Record<string, number>
  /** Innermost named frame (JS function, or a kernel/native symbol when no JS is on the stack). */
  readonly self: ReadonlyArray<readonly [string, number]>
  /** Every `src/` function on the stack, each counted once per sample. */
  readonly inclusive: ReadonlyArray<readonly [string, number]>
  /** The file of the innermost named JS frame, for the packages' areas (which of Effect's modules: its runtime, Schema, HTTP…). */
  readonly packageFiles: ReadonlyArray<readonly [string, number]>
  /**
   * The samples in JS code (the innermost JS frame, whoever's), by the tier V8 ran it in: its
   * interpreter (Ignition), baseline code (Sparkplug), Maglev or TurboFan — how much of the time
   * is code not (yet) optimized.
   */
  readonly tiers: Record<string, number>
  /** Node's own JS by who called it: the nearest frame above it of the gateway, a package, or none. */
  readonly nodeCallers: ReadonlyArray<readonly [string, number]>
}

const areaOf = (frame: string): string | undefined => {
  if (frame.includes("[kernel")) return "kernel"
  if (frame.includes("/src/") && !frame.includes("node_modules")) return "gateway src"
  if (frame.includes("node_modules/effect/")) return "effect"
  if (frame.includes("node_modules/@effect/")) return "@effect/platform"
  if (frame.includes("node_modules/undici")) return "undici"
  if (frame.includes("JS:") && frame.includes(" node:")) return "node (JS)"
  // Any other package's JS (ioredis, …), by name; native frames name the node binary's own path.
  const pkg = frame.includes("JS:") ? /node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(frame) : null
  if (pkg !== null) return pkg[1]
  if (frame.includes("wasm")) return "wasm"
  return undefined
}

/** V8's marker before a jitdump name: `~` interpreted, `^` Sparkplug, `+` Maglev, `*` TurboFan. */
const tierOf = (frame: string): string => {
  const marker = /^JS:([*+^~]?)/.exec(frame)?.[1] ?? ""
  return marker === "~" ? "interpreted (Ignition)" : marker === "^" ? "baseline (Sparkplug)" : marker === "+" ? "Maglev" : marker === "*" ? "TurboFan" : "other JS (builtins, stubs)"
}

/** `JS:*'name file:///…/src/x.ts:1:2+0x1f (/…/jitted-1-2.so)` → `name src/x.ts:1:2` */
const frameName = (frame: string) =>
  frame.replace(/\+0x[0-9a-f]+ \(.*$/, "").replace(/^JS:[*+^~']*'?/, "").replace(/file:\/\/\/\S*?\/(src|node_modules)\//, "$1/")

/** One sample: when (CLOCK_MONOTONIC µs, as `process.hrtime`), the CPU time it stands for, and its frames, innermost first. */
export interface PerfSample {
  readonly atUs: number
  readonly periodUs: number
  readonly frames: ReadonlyArray<string>
}

/**
 * Injects the jitdump into `dir/perf.data`, reads the samples back and removes the files perf and
 * V8 wrote (they are large).
 */
export const perfSamples = (dir: string): Array<PerfSample> => {
  const injected = join(dir, "perf.jit.data")
  const inject = spawnSync("perf", ["inject", "--jit", "-i", join(dir, "perf.data"), "-o", injected], { encoding: "utf8" })
  if (inject.status !== 0) throw new Error(`perf inject failed: ${inject.stderr}`)
  const script = spawnSync("perf", ["script", "-i", injected], { encoding: "utf8", maxBuffer: 1 << 30 })
  if (script.status !== 0) throw new Error(`perf script failed: ${script.stderr}`)
  for (const file of readdirSync(dir)) {
    if (file.startsWith("jitted-") || file.startsWith("jit-") || file.startsWith("perf.") || file.startsWith("isolate-")) rmSync(join(dir, file), { force: true })
  }
  const samples: Array<PerfSample> = []
  for (const block of script.stdout.split("\n\n")) {
    const lines = block.split("\n")
    const head = lines.findIndex((line) => line.trim() !== "")
    if (head < 0) continue
    const frames = lines.slice(head + 1).map((line) => line.trim().split(" ").slice(1).join(" ")).filter((f) => f !== "")
    if (frames.length === 0) continue
    // `node 6165 [000] 12345.678901: 500000 cpu-clock:` — the time is CLOCK_MONOTONIC seconds (`-k 1`),
    // then the sample's period (ns of the thread's CPU time for cpu-clock).
    const at = /\s(\d+\.\d+):\s+(\d+)\s/.exec(lines[head]!)
    samples.push({ atUs: at === null ? Number.NaN : Math.round(Number(at[1]) * 1e6), periodUs: at === null ? Number.NaN : Number(at[2]) / 1000, frames })
  }
  return samples
}

/**
 * Where the samples' time went. Samples whose innermost frame is a V8 builtin or native code count
 * for the first area-named frame above it (a `Builtins_LoadIC` in an Effect function is Effect's).
 */
export const breakdownOf = (samples: ReadonlyArray<PerfSample>, top = 40): PerfBreakdown => {
  const areas = new Map<string, number>()
  const self = new Map<string, number>()
  const inclusive = new Map<string, number>()
  const packageFiles = new Map<string, number>()
  const tiers = new Map<string, number>()
  const nodeCallers = new Map<string, number>()
  const bump = (map: Map<string, number>, key: string) => map.set(key, (map.get(key) ?? 0) + 1)
  for (const { frames } of samples) {
    const named = frames.find((f) => areaOf(f) !== undefined)
    const area = named === undefined ? undefined : areaOf(named)
    bump(areas, area ?? "native (no JS on the stack)")
    bump(self, frameName(named === undefined || area === "kernel" ? frames[0]! : named))
    const file = named === undefined ? null : /node_modules\/(\S+?):\d+:\d+/.exec(frameName(named))
    if (file !== null) bump(packageFiles, file[1]!)
    const js = frames.find((f) => f.startsWith("JS:"))
    if (js !== undefined) bump(tiers, tierOf(js))
    if (area === "node (JS)") {
      const caller = frames.find((f) => { const a = areaOf(f); return a !== undefined && a !== "node (JS)" && a !== "kernel" })
      bump(nodeCallers, `${frameName(named!)} ← ${caller === undefined ? "(node only)" : frameName(caller)}`)
    }
    const seen = new Set<string>()
    for (const frame of frames) {
      if (areaOf(frame) !== "gateway src") continue
      const name = frameName(frame)
      if (!seen.has(name)) {
        seen.add(name)
        bump(inclusive, name)
      }
    }
  }
  const n = samples.length
  const share = (map: Map<string, number>, count: number) =>
    [...map].sort((a, b) => b[1] - a[1]).slice(0, count).map(([k, v]) => [k, v / n] as const)
  return { samples: n, areas: Object.fromEntries(share(areas, 100)), self: share(self, top), inclusive: share(inclusive, top), packageFiles: share(packageFiles, top), nodeCallers: share(nodeCallers, top), tiers: Object.fromEntries(share(tiers, 10)) }
}

/** `perfSamples` then `breakdownOf`. */
export const perfBreakdown = (dir: string, top = 40): PerfBreakdown => breakdownOf(perfSamples(dir), top)
