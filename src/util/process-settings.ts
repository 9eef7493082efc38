/**
 * Settings the `serve` process must have from its first instruction, so it sets them by replacing
 * itself (`process.execve`: same pid, same standard streams; ~0.05–0.2 s) before anything else
 * starts: glibc's allocator set to give memory back, V8's young generation capped, V8's
 * allocation-site pretenuring off, and on one core, V8's collector on the main thread alone.
 *
 * ## The allocator
 *
 * Two arenas (`MALLOC_ARENA_MAX=2`) and fixed trim and mmap thresholds (`GLIBC_TUNABLES`).
 *
 * glibc gives a thread that allocates while another holds an arena an arena of its own, up to
 * eight per core, and keeps what is freed in each for reuse rather than giving it back to the
 * system. A gateway has a dozen threads that allocate natively (the main thread, V8's compiler
 * and collector threads, the embedded database's thread compiling PGlite's WASM, libuv's pool),
 * and start-up's bursts leave ~35 MiB free but resident in their arenas for good: an `npm start`
 * that fell quiet held 227–235 MiB RSS, against 189–197 with two arenas (same data dir, after the
 * quiet trim, four starts each).
 *
 * glibc also raises its mmap threshold after a large block is freed (up to 32 MiB), and its trim
 * threshold to twice that, so after a burst large buffers come from the heap and the heap's free
 * top stays resident. Both are held at glibc's own starting value, 128 KiB (setting them turns
 * the raising off): the streams benchmark's gateway, quiet after start 182 → 170 MiB, quiet after
 * 3,000 streams 210 → 201 MiB (`npm run bench -- --quick --only=streams`, one run each).
 *
 * Neither costs measurable CPU on the request path (`bench/hot-path.ts`, alternated pairs: two
 * arenas 1,760–2,120 against 2,225–2,270 µs per request; the thresholds 1,980–2,070 against
 * 1,965–2,085, streamed 2,988–3,150 against 2,900–3,200), since nearly every allocation there is
 * the main thread's V8 heap, not malloc.
 *
 * The variables are read once, when the C library starts. An operator who set `MALLOC_ARENA_MAX`
 * or `GLIBC_TUNABLES` (any value) manages the allocator: nothing is changed. Elsewhere than Linux
 * nothing happens (other C libraries do not read them, and the call is only on POSIX systems).
 *
 * ## One core: `--single-threaded-gc`
 *
 * When the process may run on one core only (its CPU affinity, as `taskset -c 0` or a container's
 * `--cpuset-cpus` sets it; `os.availableParallelism()`), V8's parallel and concurrent collector
 * threads cannot run beside the main thread, only take turns with it, and a young-generation
 * collection waits for them: pinned to one core at 200 req/s, scavenges paused 23–35 ms (8–10 in
 * 20 s), against 2.7–4 ms (14 in 20 s, 31–39 ms in all) with the collector on the main thread, the
 * event loop's delay p99 3.3–5.3 → 2.2–2.9 ms, latency p99 at that rate 15–21 → 7–11 ms, RSS under
 * load 326–348 → 285–289 MiB (`bench/hot-path.ts`, three alternated rounds; CPU per request was
 * within the VM's noise). The waiting is for the concurrent marker: `--no-concurrent-marking` alone
 * gave the same short scavenges (4.7 ms at most), while parallel scavenging, concurrent sweeping
 * and array-buffer sweeping off left them at 25 ms. So a process on one core runs with
 * `--single-threaded-gc` (all of the collector's helpers off: none can run beside it there), unless its
 * command line already says either way (`--no-single-threaded-gc` keeps the helpers; node does not
 * take either in `NODE_OPTIONS`). Affinity is
 * read once, at start: a process pinned later keeps what it started with.
 *
 * ## The young generation: `--max-semi-space-size=16`
 *
 * Under load V8 grows the young generation to its cap, on 64-bit Node 24 a 32 MiB semi-space
 * (~95 MiB committed), and keeps it there until the quiet trim. A burst of open streams does the
 * same: 1,000 streams grew the committed young generation 38.9 → 94.8 MiB, 57 of the 94 KiB of RSS
 * each stream seemed to cost (their heap after a full collection: 40 KiB each;
 * `bench/stream-memory.ts`). Capped at 16 MiB, scavenges come ~2–4× as often but each copies the
 * same survivors (what is live at that moment, not the nursery's size), so (2026-11-28, alternated
 * runs on one VM):
 * - non-streamed at 200 req/s (`bench/hot-path.ts`, two rounds): scavenge time 15–16 → 23–33 ms
 *   per 3,000 requests (3–6 µs per request, below the CPU's run-to-run noise: 910 / 1,000 against
 *   867 / 947 µs), loaded RSS 283–284 → 265–268 MiB, loop-delay p99 unchanged;
 * - streamed at 200 streams/s: scavenge time 67 → 238–247 ms per 3,000 streams (+~58 µs per
 *   stream, ~3%), loaded RSS 323 → 265–267 MiB, loop-delay p99 and longest pause unchanged;
 * - the streams suite (`npm run bench -- --quick --only=streams`, two runs each): RSS per open
 *   stream 48.2 / 49.3 → 41.0 / 25.1 KiB, peak RSS 400 / 402 → 354 / 319 MiB, CPU per stream
 *   mixed, within the runs' spread.
 * Idle RSS after the quiet trim is unchanged (190.6–192.7 against 187.5–193.4 MiB, three
 * alternated starts). An operator's own `--max-semi-space-size` or `--min-semi-space-size`
 * (command line or `NODE_OPTIONS`) is left alone; `--max-semi-space-size=0` is V8's own sizing.
 *
 * ## No allocation-site pretenuring: `--no-allocation-site-pretenuring`
 *
 * V8 watches the object literals a function allocates, and when nearly all of one site's objects
 * outlive a young-generation collection it allocates that site's objects in the old generation
 * from then on. Under load, some of a request's own objects got that verdict (`--trace-pretenuring`
 * at 200 req/s: 7–10 sites each with ~123 objects, one per request since the last scavenge, found
 * alive, several pretenured from then on), and a dead one stays in the old generation until the
 * next full collection — and keeps alive, through every scavenge, the young objects it points to:
 * the rest of its request, which were then copied and promoted too. At 200
 * non-streamed req/s (`--trace-gc-nvp`, `bench/hot-path.ts`, 2026-12-02, medians of 14
 * scavenges): 420–426 KB survived and 357–361 KB promoted per scavenge, pauses 3.0–3.1 ms; with
 * metering off (fewer such objects) 171 / 107 KB, 1.8 ms; with pretenuring off, metered,
 * 152–163 / 65–73 KB, 1.4–1.5 ms. Over 4,000 requests the scavenges took 46–55 ms in all against
 * 83–108, loaded RSS 269–270 against 282–288 MiB (three alternated rounds); 16-delta streams paced
 * 5 ms apart, 138–159 → 58–68 ms of scavenges per 15 s, CPU per SSE frame a median 36 against 32 µs
 * over five rounds (inside a noisy VM's spread; perhaps a small cost for long streams, whose
 * per-frame state is now copied once before it is promoted); Redis mode and the start (time to
 * listen, peak RSS) unchanged. An operator's own
 * `--[no-]allocation-site-pretenuring` is left alone (node does not take it in `NODE_OPTIONS`).
 */
import { availableParallelism } from "node:os"

const ALLOCATOR_SETTINGS = {
  MALLOC_ARENA_MAX: "2",
  GLIBC_TUNABLES: "glibc.malloc.trim_threshold=131072:glibc.malloc.mmap_threshold=131072"
}

const SINGLE_THREADED_GC = "--single-threaded-gc"
const YOUNG_GENERATION_CAP = "--max-semi-space-size=16"
const NO_PRETENURING = "--no-allocation-site-pretenuring"

/** What this process lacks: the allocator's variables, the young generation's settings, and V8 flags for the cores it may use. */
export const missingSettings = (
  env: Readonly<Record<string, string | undefined>>,
  execArgv: ReadonlyArray<string>,
  cores: number
): { readonly env: Readonly<Record<string, string>>; readonly flags: ReadonlyArray<string> } => {
  const given = operatorFlags(env, execArgv)
  const says = (flag: RegExp) => given.some((arg) => flag.test(arg))
  return {
    env: env.MALLOC_ARENA_MAX === undefined && env.GLIBC_TUNABLES === undefined ? ALLOCATOR_SETTINGS : {},
    flags: [
      ...(says(/^--(max|min)[-_]semi[-_]space[-_]size(=|$)/) ? [] : [YOUNG_GENERATION_CAP]),
      ...(says(/^--(no[-_]?)?allocation[-_]site[-_]pretenuring(=|$)/) ? [] : [NO_PRETENURING]),
      ...(cores === 1 && !says(/^--(no[-_]?)?single[-_]threaded[-_]gc(=|$)/) ? [SINGLE_THREADED_GC] : [])
    ]
  }
}

/**
 * The flags the operator gave: the command line's and `NODE_OPTIONS`'s. Both count, since a flag
 * added on the command line overrides the same flag in `NODE_OPTIONS` (node reads it first); node
 * takes the semi-space sizes there, not `--single-threaded-gc`.
 */
const operatorFlags = (env: Readonly<Record<string, string | undefined>>, execArgv: ReadonlyArray<string>) =>
  [...execArgv, ...(env.NODE_OPTIONS ?? "").split(/\s+/).filter((arg) => arg !== "")]

/** Replaces this process with itself under the settings above, when it lacks any of them. */
export const applyProcessSettings = (): void => {
  if (process.platform !== "linux" || process.execve === undefined) return
  const missing = missingSettings(process.env, process.execArgv, availableParallelism())
  if (Object.keys(missing.env).length === 0 && missing.flags.length === 0) return
  try {
    process.execve(process.execPath, [process.execPath, ...missing.flags, ...process.execArgv, ...process.argv.slice(1)], {
      ...process.env,
      ...missing.env
    })
  } catch {
    // Not replaced (the binary moved, a seccomp filter refused execve): this process serves as it
    // is, with glibc's defaults and V8's — more memory, nothing else changes.
  }
}
