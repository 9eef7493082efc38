/**
 * The embedded database's worker thread as a thread: where its code is, the process-wide V8 rule
 * its WASM needs, and a thread started early.
 *
 * Starting early: `serve` on the embedded database (`src/main.ts`) starts the thread before the
 * gateway loads its own modules (~1 s of one core at start), so the thread's own start — Node's
 * bootstrap, PGlite's modules, compiling its 9 MB of WASM — runs beside that on the other core,
 * instead of after it while the main thread waits. The thread then waits for its settings (data
 * dir, shared buffers, memory cap), `{ type: "open", data }`, which come one of two ways:
 * - early too: once the command line and environment are read, `serve` takes the data dir's lock
 *   and sends them (`openEarly` in embedded-database.ts), so the database opens (~0.5 s here)
 *   while the main thread is still loading the gateway's modules;
 * - from the database layer, when it adopts the thread (`takeEarlyThread`) for its first worker.
 * A layer that adopts a thread already told settings other than its own ends it and starts another.
 * Until then the thread does not keep the process alive; until told its settings it holds no file
 * of the data dir. A layer on PostgreSQL ends it unused (`discardEarlyThread`).
 *
 * This module imports nothing of Effect's, so `main.ts` can load it before anything else.
 */
import { setFlagsFromString } from "node:v8"
import { Worker } from "node:worker_threads"
import type { EmbeddedWorkerData, FromDatabaseWorker, ToDatabaseWorker } from "./embedded-worker.ts"

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

/** A thread started early, as the layer adopts it. */
export interface EarlyThread {
  readonly worker: Worker
  /** The settings it was sent before it was adopted (`openEarly`), if any. */
  readonly openedWith: EmbeddedWorkerData | undefined
  /**
   * Its first `ready` or `failed` once it was sent settings: kept here, because a Worker's
   * messages are not queued for listeners added later, and it may answer before it is adopted.
   */
  readonly answer: FromDatabaseWorker | undefined
}

let early: { readonly worker: Worker; exited: boolean; openedWith: EmbeddedWorkerData | undefined; answer: FromDatabaseWorker | undefined } | undefined

/** Starts the database's thread now, for the embedded database layer to adopt when it opens. */
export const startEarlyThread = (): Worker => {
  if (early !== undefined) return early.worker
  wasmTieringRule()
  const worker = new Worker(WORKER_URL, { workerData: EARLY_START, resourceLimits: WORKER_RESOURCE_LIMITS })
  worker.unref()
  const started = { worker, exited: false, openedWith: undefined, answer: undefined }
  worker.once("exit", () => {
    started.exited = true
  })
  // A thread that fails before it is adopted exits; the layer then starts one of its own.
  worker.on("error", () => {})
  early = started
  return worker
}

/**
 * Sends the thread started early its settings now, before a layer adopts it; false when there is
 * no such thread, or it was sent settings already. The caller holds the data dir's lock.
 */
export const sendEarlySettings = (data: EmbeddedWorkerData): boolean => {
  const started = early
  if (started === undefined || started.exited || started.openedWith !== undefined) return false
  started.openedWith = data
  const onMessage = (message: FromDatabaseWorker) => {
    if (message.type !== "ready" && message.type !== "failed") return
    started.answer ??= message
    started.worker.off("message", onMessage)
  }
  started.worker.on("message", onMessage)
  started.worker.postMessage({ type: "open", data })
  return true
}

/** The thread started early, if there is one still running; it is handed out once. */
export const takeEarlyThread = (): EarlyThread | undefined => {
  const started = early
  early = undefined
  if (started === undefined || started.exited) return undefined
  started.worker.ref()
  return { worker: started.worker, openedWith: started.openedWith, answer: started.answer }
}

/**
 * Ends a thread started early that no layer adopted, once the command that started it is over (it
 * failed before its database layer was built). One that opened the database closes it first, as
 * the layer would (`stop`, once it is open), instead of leaving it as a crash leaves it: the next
 * open would recover it. Resolves when the thread has exited; one that does not stop within
 * `timeoutMs` is terminated.
 */
export const stopEarlyThread = (timeoutMs = 10_000): Promise<void> => {
  const thread = takeEarlyThread()
  if (thread === undefined) return Promise.resolve()
  const { worker, openedWith, answer } = thread
  if (openedWith === undefined) return worker.terminate().then(() => undefined) // it holds no file
  return new Promise<void>((resolve) => {
    const timer = setTimeout(() => void worker.terminate(), timeoutMs)
    worker.once("exit", () => {
      clearTimeout(timer)
      resolve()
    })
    const onAnswer = (message: FromDatabaseWorker) => {
      if (message.type === "ready") worker.postMessage({ type: "stop" } satisfies ToDatabaseWorker)
      else if (message.type === "failed") void worker.terminate()
    }
    if (answer !== undefined) onAnswer(answer)
    else worker.on("message", onAnswer)
  })
}

/** Ends a thread started early that no layer will adopt (the gateway runs on PostgreSQL), without waiting. */
export const discardEarlyThread = () => void stopEarlyThread()
