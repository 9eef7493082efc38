/**
 * The embedded database: PGlite in a worker thread (`embedded-worker.ts`), reached through the
 * same `@effect/sql-pg` client as PostgreSQL. Each connection is a MessagePort carrying the wire
 * protocol, wrapped here in a Duplex for `PgClientConfig.stream`; the event loop only encodes
 * statements and decodes answers, while parsing, planning, executing and writing pages happen on
 * the worker's thread.
 *
 * Memory is bounded by the Postgres settings below (shared buffers, work memory, connection slots)
 * and by the V8 tiering rule in `wasmTieringRule`; see README "Architecture".
 *
 * Supervision: if the worker dies (a WASM abort, an out-of-memory), open connections fail — their
 * statements end in SqlError, which the HTTP layer answers with 503 — and a new worker is started
 * with backoff (0.25 s doubling to 30 s), recovering the data directory like any Postgres after a
 * crash. New connections fail at once while it restarts; nothing waits on a dead thread.
 */
import { PgClient } from "@effect/sql-pg"
import { Deferred, Effect, Schema } from "effect"
import { existsSync, readdirSync, renameSync, rmSync } from "node:fs"
import { join } from "node:path"
import { Duplex } from "node:stream"
import { MessageChannel, type MessagePort, Worker } from "node:worker_threads"
import { MAX_SQL_MESSAGE_BYTES } from "../util/json-limits.ts"
import { lockDataDir, releaseDataDirLock, takeDataDirLock } from "./data-dir.ts"
import { sendEarlySettings, stopEarlyThread, takeEarlyThread, wasmTieringRule, WORKER_RESOURCE_LIMITS, WORKER_URL } from "./embedded-thread.ts"
import { keepReserve, lowDiskNote, releaseReserve } from "./disk-reserve.ts"
import { PortStream } from "./port-stream.ts"
import { pgliteVersion, templateFile, unpackTemplate } from "./template.ts"
import type { EmbeddedWorkerData, FromDatabaseWorker, ToDatabaseWorker } from "./embedded-worker.ts"

export class StorageError extends Schema.TaggedError<StorageError>()("StorageError", {
  message: Schema.String
}) {}

export interface EmbeddedOptions {
  readonly dataDir: string
  /** Postgres `shared_buffers`, MiB: the page cache inside WASM memory (which never shrinks). */
  readonly sharedBuffersMb: number
  /**
   * The most WASM memory the database may grow to; a statement that needs more fails with "out of
   * memory". Default: 512 MiB above the shared buffers, far above what the settings below use
   * (~20 MiB besides the shared buffers) — a bound, not a budget.
   */
  readonly maxWasmMemoryMb?: number
  /**
   * Receives a function that opens a connection as a bare MessagePort (undefined while the worker
   * restarts), for a worker thread's own client over `PortStream`: an artifact upload's parse
   * worker writes its rows that way, off the event loop (`artifacts/row-writer.ts`).
   */
  readonly exposePorts?: ((open: () => MessagePort | undefined) => void) | undefined
  /** Room kept back in the data dir for a full disk, MiB (`disk-reserve.ts`); 0: none. Default 32. */
  readonly diskReserveMb?: number | undefined
}

export const DEFAULT_DISK_RESERVE_MB = 32

/**
 * Postgres settings for the worker's single backend. PGlite's defaults are sized for a server:
 * 160 MB of shared buffers and slots for 100 connections, all allocated (and zeroed, so resident)
 * at start in a WASM memory that never gives pages back. One backend needs far less.
 */
const embeddedSettings = (options: EmbeddedOptions): ReadonlyArray<string> => [
  `shared_buffers=${options.sharedBuffersMb}MB`,
  // Shared memory for lock tables and backend slots scales with this; there is one backend.
  "max_connections=4",
  // Per sort/hash before spilling to disk; WASM memory keeps its high-water mark, so keep it small.
  "work_mem=4MB",
  "maintenance_work_mem=16MB",
  "temp_buffers=1MB",
  // There is no checkpointer process: the backend checkpoints when the WAL reaches this size, which
  // also bounds recovery after a crash (WAL replayed at the next start).
  "max_wal_size=64MB",
  "min_wal_size=32MB"
]

/**
 * initdb options for a new data directory (the template is made with them too): the same small
 * sizes as at run time, written to its postgresql.conf. Start-up settings above override them.
 */
export const embeddedInitdbOptions: ReadonlyArray<string> = ["-c", "shared_buffers=8MB", "-c", "max_connections=4"]

/** A connection attempt while no worker is up: fails at once, so the caller gets a SqlError (→ 503). */
const unavailable = (reason: string) => {
  const stream = new Duplex({ read() {}, write(_chunk, _encoding, callback) { callback() } })
  process.nextTick(() => stream.destroy(new Error(`the embedded database is unavailable: ${reason}`)))
  return stream
}

interface Generation {
  readonly worker: Worker
  /** Completes with the reason once the thread has exited. */
  readonly exited: Deferred.Deferred<string>
  readonly streams: Set<PortStream>
  stopping: boolean
}

const describe = (error: unknown) => (error instanceof Error ? error.message : String(error))

/** This process's live database worker threads (one per open embedded database). */
const liveWorkers = new Set<Worker>()

/**
 * The worker threads currently serving embedded databases in this process, for diagnostics and
 * for tests that make one die (`terminate()`) to check the gateway's answer and its recovery.
 */
export const embeddedWorkers = (): ReadonlyArray<Worker> => [...liveWorkers]

/**
 * PGlite's WASM module as a database thread of this process compiled it (handed back with its
 * `ready`). A later thread — a restart after a crash, or another database in the same process, as
 * in a test worker — is given it instead of compiling it again: V8 compiles a module's functions
 * lazily, as they are first called, and threads sharing one module share what was compiled, so
 * Postgres' start is not compiled anew (~0.12 s of CPU per open here). Sharing costs no memory while
 * a thread runs. It is held while an embedded database is open (a restart needs it), then only
 * weakly: a process whose last database closed does not keep its ~20 MiB beyond the next full
 * collection, and a database opened before that still finds it.
 */
let heldModule: WebAssembly.Module | undefined
let weakModule: WeakRef<WebAssembly.Module> | undefined
let openDatabases = 0
let compiles = 0

/** The compiled module to give a new thread, if this process still has one. */
const compiledModule = (): WebAssembly.Module | undefined => heldModule ?? weakModule?.deref()

/** Keeps the module a thread is ready with (the first one; they are all the same module). */
const keepModule = (module: WebAssembly.Module, compiledHere: boolean) => {
  if (compiledHere) compiles++
  if (compiledModule() !== undefined) return
  weakModule = new WeakRef(module)
  if (openDatabases > 0) heldModule = module
}

/** Holds the module while at least one embedded database is open (its scope, in `embeddedClient`). */
const databaseOpened = () => {
  openDatabases++
  heldModule ??= weakModule?.deref()
}
const databaseClosed = () => {
  if (--openDatabases === 0) heldModule = undefined
}

/** How many database threads of this process compiled PGlite's module themselves (diagnostics, tests). */
export const pgliteCompileCount = (): number => compiles

/** Starts a worker and waits until its database is open (or fails with why it is not). */
const spawn = (data: EmbeddedWorkerData, onDiskFull: () => void = () => undefined) =>
  Effect.callback<Generation, StorageError>((resume) => {
    // The thread `serve` started before loading its modules, if any (`embedded-thread.ts`): told
    // its settings now, or opened already with these very settings (`openEarly`), it serves as a
    // thread started with them would. One sent other settings is ended, and a new one started.
    let early = takeEarlyThread()
    if (early?.openedWith !== undefined && !sameWorkerData(early.openedWith, data)) {
      void early.worker.terminate()
      early = undefined
    }
    const worker = early?.worker ??
      new Worker(WORKER_URL, { workerData: { ...data, module: compiledModule() } satisfies EmbeddedWorkerData, resourceLimits: WORKER_RESOURCE_LIMITS })
    if (early !== undefined && early.openedWith === undefined) worker.postMessage({ type: "open", data } satisfies ToDatabaseWorker)
    const generation: Generation = { worker, exited: Deferred.makeUnsafe<string>(), streams: new Set(), stopping: false }
    let ready = false
    let failure: string | undefined
    const onMessage = (message: FromDatabaseWorker) => {
      if (message.type === "ready") {
        keepModule(message.module, message.compiled)
        ready = true
        liveWorkers.add(worker)
        resume(Effect.succeed(generation))
      } else if (message.type === "failed") failure ??= message.message
      else if (message.type === "disk-full") onDiskFull()
    }
    worker.on("message", onMessage)
    // Its answer to settings sent before it was adopted, if it came already.
    if (early?.answer !== undefined) onMessage(early.answer)
    worker.on("error", (error) => {
      failure ??= describe(error)
    })
    worker.once("exit", (code) => {
      liveWorkers.delete(worker)
      const reason = failure ?? `its thread exited with code ${code}`
      for (const stream of generation.streams) stream.destroy(new Error(`the embedded database stopped: ${reason}`))
      generation.streams.clear()
      if (!ready) resume(Effect.fail(new StorageError({ message: `cannot open the embedded database: ${reason}${lowDiskNote(data.pgDir)}` })))
      Deferred.doneUnsafe(generation.exited, Effect.succeed(reason))
    })
    return Effect.promise(() => worker.terminate())
  })

/** Runs initdb into `data.pgDir`, in a thread of its own that then exits. */
export const initialize = (data: EmbeddedWorkerData) =>
  Effect.callback<void, StorageError>((resume) => {
    const worker = new Worker(WORKER_URL, { workerData: { ...data, mode: "initialize", module: compiledModule() } satisfies EmbeddedWorkerData })
    let failure: string | undefined
    let initialized = false
    worker.on("message", (message: FromDatabaseWorker) => {
      if (message.type === "initialized") initialized = true
      else if (message.type === "failed") failure ??= message.message
    })
    worker.on("error", (error) => {
      failure ??= describe(error)
    })
    worker.once("exit", (code) => {
      resume(initialized ? Effect.void : Effect.fail(new StorageError({
        message: `cannot create the embedded database in ${data.pgDir}: ${failure ?? `its thread exited with code ${code}`}${lowDiskNote(data.pgDir)}`
      })))
    })
    return Effect.promise(() => worker.terminate())
  })

/**
 * Creates the database of a new data directory: unpacked from the template for the installed
 * PGlite (`template.ts`), else made by initdb. Made aside and renamed into place, so a start killed
 * half-way leaves no half-made database.
 */
const createDatabase = (data: EmbeddedWorkerData) =>
  Effect.gen(function*() {
    if (existsSync(data.pgDir) && readdirSync(data.pgDir).length > 0) {
      return yield* new StorageError({ message: `${data.pgDir} is not an embedded database (no PG_VERSION); move it away to start afresh` })
    }
    const fresh = `${data.pgDir}.new`
    rmSync(fresh, { recursive: true, force: true })
    const template = templateFile()
    if (template !== undefined) {
      yield* Effect.tryPromise({
        try: () => unpackTemplate(template, fresh),
        catch: (cause) => new StorageError({ message: `cannot unpack the embedded database template ${template}: ${describe(cause)}${lowDiskNote(fresh)}` })
      })
    } else {
      yield* Effect.logInfo(`embedded database: no template for PGlite ${pgliteVersion()}; creating it with initdb (slower, ~500 MB for a few seconds)`)
      yield* initialize({ ...data, pgDir: fresh })
    }
    rmSync(data.pgDir, { recursive: true, force: true })
    renameSync(fresh, data.pgDir)
  })

/** Asks the worker to close the database cleanly; terminates it if that takes longer than 10 s. */
const stop = (generation: Generation) =>
  Effect.gen(function*() {
    generation.stopping = true
    generation.worker.postMessage({ type: "stop" } satisfies ToDatabaseWorker)
    const closed = yield* Deferred.await(generation.exited).pipe(Effect.timeoutOption("10 seconds"))
    if (closed._tag === "None") {
      yield* Effect.logWarning("embedded database: the worker did not close in 10 s; terminating it")
      yield* Effect.promise(() => generation.worker.terminate())
    }
  })

/** What the database's thread is told to open the database in `options.dataDir` with. */
const serveWorkerData = (options: EmbeddedOptions): EmbeddedWorkerData => ({
  mode: "serve",
  pgDir: join(options.dataDir, "pglite"),
  settings: embeddedSettings(options),
  initdbOptions: embeddedInitdbOptions,
  maxWasmMemoryMb: options.maxWasmMemoryMb ?? 512 + options.sharedBuffersMb
})

const sameWorkerData = (a: EmbeddedWorkerData, b: EmbeddedWorkerData) => JSON.stringify(a) === JSON.stringify(b)

/** The data dir whose lock `openEarly` took, until `closeEarly`. */
let lockedEarly: string | undefined

/**
 * Opens the database in `options.dataDir` on the thread started early (`embedded-thread.ts`) now,
 * before the command's modules are loaded and its layers built (`closeEarly` once it is over): the
 * layer adopts it open if its settings are the same (they come from the same command line and
 * environment). Only an existing database is opened this way (a new one is made from the template
 * by the layer first), and only under the data dir's lock, taken here and kept (the layer takes it
 * again as its own).
 * False when nothing was sent: no such thread, no database yet, or the lock is another process's
 * (the layer then reports that as it does without this step).
 */
export const openEarly = (options: EmbeddedOptions): boolean => {
  const data = serveWorkerData(options)
  if (!existsSync(join(data.pgDir, "PG_VERSION"))) return false
  if (takeDataDirLock(options.dataDir) !== undefined) return false
  lockedEarly = options.dataDir
  return sendEarlySettings(data)
}

/**
 * After the command that called `openEarly`: if no database layer took over what it opened (the
 * command failed first: a config mistake, a wrong argument), the database is closed cleanly and
 * the data dir's lock let go, as the layer does when it closes, instead of both being left as a
 * crash leaves them. A layer that took them over has let go of both already (its scope is closed).
 */
export const closeEarly = async (): Promise<void> => {
  const dataDir = lockedEarly
  lockedEarly = undefined
  await stopEarlyThread()
  if (dataDir !== undefined) releaseDataDirLock(dataDir)
}

/**
 * The SQL client on the embedded database in `options.dataDir`: holds the data dir's lock, runs
 * the worker (restarting it if it dies) and closes the database cleanly when the scope closes.
 */
export const embeddedClient = (options: EmbeddedOptions) =>
  Effect.gen(function*() {
    yield* lockDataDir(options.dataDir)
    yield* Effect.acquireRelease(Effect.sync(databaseOpened), () => Effect.sync(databaseClosed))
    // Earlier versions served PGlite on this Unix socket; one left by a killed process is stale
    // (we hold the data dir's lock, so no live process uses it).
    rmSync(join(options.dataDir, ".pg.sock"), { force: true })
    wasmTieringRule()
    const data = serveWorkerData(options)
    if (!existsSync(join(data.pgDir, "PG_VERSION"))) yield* createDatabase(data)
    // A full disk: the first statement refused for it frees the reserve (`disk-reserve.ts`), and
    // a start that fails on a nearly full disk frees it and tries again.
    const log = Effect.runForkWith(yield* Effect.context<never>())
    const reserveMb = options.diskReserveMb ?? DEFAULT_DISK_RESERVE_MB
    const onDiskFull = () => {
      if (releaseReserve(options.dataDir)) {
        log(Effect.logError(
          `embedded database: the disk holding ${options.dataDir} is full; its ${reserveMb} MiB reserve is freed so usage can still ` +
            "be written — free some space (the reserve is made again at a later start)"
        ))
      }
    }
    const start = spawn(data, onDiskFull).pipe(
      Effect.catch((error) =>
        lowDiskNote(data.pgDir) !== "" && releaseReserve(options.dataDir)
          ? Effect.logError(`embedded database: ${error.message}; its disk reserve is freed, trying again`).pipe(Effect.andThen(spawn(data, onDiskFull)))
          : Effect.fail(error)
      )
    )
    let current: Generation | undefined = yield* start
    let closing = false
    // Registered before the supervisor and the client: at close the client's connections end
    // first, then the supervisor stops, then this closes whichever worker is current.
    yield* Effect.addFinalizer(() =>
      Effect.suspend(() => {
        closing = true
        return current === undefined ? Effect.void : stop(current)
      })
    )

    // Restarts a worker that died, with backoff; a worker that stays up a minute resets it.
    yield* Effect.forkScoped(Effect.gen(function*() {
      let backoffMs = 250
      let upSince = Date.now()
      while (current !== undefined) {
        const dead: Generation = current
        const reason = yield* Deferred.await(dead.exited)
        if (dead.stopping || closing) return
        current = undefined
        if (Date.now() - upSince > 60_000) backoffMs = 250
        yield* Effect.logError(`embedded database: the worker died (${reason}); restarting it`)
        while (current === undefined && !closing) {
          yield* Effect.sleep(backoffMs)
          backoffMs = Math.min(backoffMs * 2, 30_000)
          current = yield* start.pipe(
            Effect.map((generation): Generation | undefined => generation),
            Effect.catch((error) => Effect.as(Effect.logError(`embedded database: ${error.message}`), undefined))
          )
        }
        if (current === undefined) return
        upSince = Date.now()
        yield* Effect.logInfo("embedded database: the worker is back")
      }
    }))

    /** A new connection's client end, or undefined while no worker is up. */
    const openPort = (): { readonly port: MessagePort; readonly generation: Generation } | undefined => {
      const generation = current
      if (generation === undefined || generation.stopping) return undefined
      const { port1, port2 } = new MessageChannel()
      generation.worker.postMessage({ type: "connect", port: port2 } satisfies ToDatabaseWorker, [port2])
      return { port: port1, generation }
    }
    options.exposePorts?.(() => openPort()?.port)
    yield* Effect.forkScoped(keepReserve(options.dataDir, reserveMb))

    const connect = (): Duplex => {
      const opened = openPort()
      if (opened === undefined) return unavailable("it is restarting")
      const { port, generation } = opened
      const stream = new PortStream(port)
      generation.streams.add(stream)
      stream.once("close", () => generation.streams.delete(stream))
      return stream
    }

    // PGlite has one backend; one pooled connection keeps transactions simple and queues nothing in
    // the worker behind another connection's open transaction.
    return yield* PgClient.make({ stream: connect, ssl: false, username: "postgres", database: "postgres", maxConnections: 1, maxMessageSize: MAX_SQL_MESSAGE_BYTES })
  })
