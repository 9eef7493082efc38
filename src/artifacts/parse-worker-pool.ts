/**
 * The parse workers of large uploads (`parse-worker.ts`): started for an upload, or taken warm from
 * a pool where a worker whose upload ended cleanly waits for the next one.
 */
import { Cause, Effect, Queue, type Semaphore } from "effect"
import { Worker } from "node:worker_threads"
import type { FromParseWorker, ParseWorkerData, ToParseWorker, WriteTarget } from "./worker-protocol.ts"

const WORKER_URL = new URL("./parse-worker.ts", import.meta.url)

export interface WorkerLink {
  readonly post: (message: ToParseWorker, transfer?: ReadonlyArray<ArrayBuffer>) => void
  readonly take: Effect.Effect<FromParseWorker>
  /** Not to be kept after this upload (its connection may be what failed). */
  readonly discard: () => void
}

/**
 * Parse workers kept between uploads: a worker whose upload ended cleanly waits here, warm (its
 * SQL client loaded and connected, its code compiled), for the next large upload, instead of
 * each upload paying ~0.25 s of CPU to start a thread and load the client. At most `max` wait,
 * each for `idleMs` at most (then it is terminated, and its memory and connections go).
 */
export interface ParseWorkerPool {
  take(): Worker | undefined
  give(worker: Worker): void
  /** Terminates the waiting workers. */
  close(): Promise<void>
}

export const makeParseWorkerPool = (options: { readonly max: number; readonly idleMs: number }): ParseWorkerPool => {
  const idle = new Map<Worker, ReturnType<typeof setTimeout>>()
  let closed = false
  return {
    take: () => {
      const [worker, timer] = idle.entries().next().value ?? []
      if (worker === undefined) return undefined
      clearTimeout(timer)
      idle.delete(worker)
      worker.ref()
      return worker
    },
    give: (worker) => {
      if (closed || idle.size >= options.max) return void worker.terminate()
      // A waiting worker does not keep the process alive.
      worker.unref()
      idle.set(worker, setTimeout(() => idle.delete(worker) && void worker.terminate(), options.idleMs).unref())
    },
    close: async () => {
      closed = true
      const workers = [...idle.keys()]
      for (const timer of idle.values()) clearTimeout(timer)
      idle.clear()
      await Promise.all(workers.map((w) => w.terminate()))
    }
  }
}

/** How long a worker has to forget its upload before it is terminated instead of kept. */
const RESET_TIMEOUT_MS = 2_000

/**
 * A worker for this upload, from the pool or new. When the upload's scope closes it goes back to
 * the pool once it has answered a reset (every message of this upload is then read), else it is
 * terminated (it failed, or it is still busy: an interrupted parse, a write that would not stop).
 */
export const spawnWorker = Effect.fnUntraced(function*(permits: Semaphore.Semaphore, target: (() => WriteTarget | undefined) | undefined, pool: ParseWorkerPool | undefined) {
  yield* permits.takeScoped(1)
  const queue = yield* Queue.unbounded<FromParseWorker>()
  let healthy = true
  const onMessage = (message: FromParseWorker) => Queue.offerUnsafe(queue, message)
  const onError = (error: unknown) => {
    healthy = false
    Queue.failCauseUnsafe(queue, Cause.die(error))
  }
  const onExit = (code: number) => {
    healthy = false
    Queue.failCauseUnsafe(queue, Cause.die(new Error(`the parse worker exited (code ${code})`)))
  }
  const take = Effect.orDie(Queue.take(queue))
  const release = Effect.fnUntraced(function*(worker: Worker) {
    if (pool !== undefined && healthy) {
      worker.postMessage({ type: "reset" } satisfies ToParseWorker)
      const untilReset: Effect.Effect<void> = Effect.flatMap(take, (m) => (m.type === "reset-done" ? Effect.void : untilReset))
      const reset = yield* untilReset.pipe(Effect.timeoutOption(RESET_TIMEOUT_MS), Effect.catchCause(() => Effect.succeedNone))
      worker.off("message", onMessage).off("error", onError).off("exit", onExit)
      if (reset._tag === "Some" && healthy) return pool.give(worker)
    }
    yield* Effect.promise(() => worker.terminate())
  })
  const worker = yield* Effect.acquireRelease(
    Effect.sync(() => {
      const kept = pool?.take()
      if (kept !== undefined) return kept
      const workerData: ParseWorkerData = { target: target?.() }
      // An embedded connection's port moves to the worker (it closes with the worker's thread).
      const transferList = workerData.target?.kind === "embedded" ? [workerData.target.port] : []
      return new Worker(WORKER_URL, { workerData, transferList, resourceLimits: { maxOldGenerationSizeMb: 2048 } })
    }),
    release
  )
  worker.on("message", onMessage).on("error", onError).on("exit", onExit)
  const link: WorkerLink = {
    post: (message, transfer) => worker.postMessage(message, transfer as Array<ArrayBuffer>),
    take,
    discard: () => {
      healthy = false
    }
  }
  return link
})
