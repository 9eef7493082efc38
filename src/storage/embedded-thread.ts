/**
 * The embedded database's worker thread as a thread: where its code is, the process-wide V8 rule
 * its WASM needs, and a thread started early.
 *
 * Starting early: `serve` on the embedded database (`src/main.ts`) starts the thread before the
 * gateway loads its own modules (~1 s of one core at start), so the thread's own start — Node's
 * bootstrap, PGlite's modules, compiling its 9 MB of WASM — runs beside that on the other core,
 * instead of after it while the main thread waits. The thread then waits for its settings, which
 * only the database layer knows (data dir, shared buffers, memory cap): the layer adopts it
 * (`takeEarlyThread`) for its first worker, and posts it `{ type: "open", data }`. Until adopted
 * the thread holds no file of the data dir (the layer takes the data dir's lock first) and does not
 * keep the process alive. A layer on PostgreSQL ends it unused (`discardEarlyThread`).
 *
 * This module imports nothing of Effect's, so `main.ts` can load it before anything else.
 */
import { setFlagsFromString } from "node:v8"
import { Worker } from "node:worker_threads"

export const WORKER_URL = new URL("./embedded-worker.ts", import.meta.url)

/**
 * The worker's own JS heap (PGlite's glue and file tree; WASM memory is outside it) stays small:
 * its statements allocate little, so a 2 MB nursery costs only cheap scavenges.
 */
export const WORKER_RESOURCE_LIMITS = { maxOldGenerationSizeMb: 96, maxYoungGenerationSizeMb: 2 }

/**
 * V8 tiers hot WASM functions up from its baseline compiler (Liftoff) to its optimizing one, and
 * optimizing PGlite's SQL parser (`raw_parser`, ~100 KB of WASM) alone takes ~600 MB of compiler
 * memory for half a second — the gateway's start-up peak. V8 has no per-module switch and its
 * flags are per process (a worker cannot have its own), so tier-up is restricted process-wide to
 * one function index: 20, undici's HTTP parser loop (llhttp, the other WASM in this process), so
 * upstream responses keep being parsed by optimized code. In PGlite's module index 20 is an import
 * (it imports 135 functions), so none of PGlite is optimized; its statements run on Liftoff code in
 * the worker. test/storage/wasm-tiering.test.ts checks both indexes against the installed modules.
 * Set before any database thread starts (it compiles PGlite's module as it starts).
 */
export const LLHTTP_PARSER_FUNCTION_INDEX = 20
let tieringRuleSet = false
export const wasmTieringRule = () => {
  if (tieringRuleSet) return
  setFlagsFromString(`--wasm-tier-up-filter=${LLHTTP_PARSER_FUNCTION_INDEX}`)
  tieringRuleSet = true
}

/** What a thread started early is told to start as (`embedded-worker.ts`). */
export const EARLY_START = { mode: "early" } as const

let early: { readonly worker: Worker; exited: boolean } | undefined

/** Starts the database's thread now, for the embedded database layer to adopt when it opens. */
export const startEarlyThread = () => {
  if (early !== undefined) return
  wasmTieringRule()
  const worker = new Worker(WORKER_URL, { workerData: EARLY_START, resourceLimits: WORKER_RESOURCE_LIMITS })
  worker.unref()
  const started = { worker, exited: false }
  worker.once("exit", () => {
    started.exited = true
  })
  // A thread that fails before it is adopted exits; the layer then starts one of its own.
  worker.on("error", () => {})
  early = started
}

/** The thread started early, if there is one still running; it is handed out once. */
export const takeEarlyThread = (): Worker | undefined => {
  const started = early
  early = undefined
  if (started === undefined || started.exited) return undefined
  started.worker.ref()
  return started.worker
}

/** Ends a thread started early that no layer will adopt (the gateway runs on PostgreSQL). */
export const discardEarlyThread = () => {
  const worker = takeEarlyThread()
  if (worker !== undefined) void worker.terminate()
}
