/**
 * The embedded database's worker thread: it owns PGlite (Postgres compiled to WASM) so that every
 * statement — parsing, planning, executing, writing pages — runs off the gateway's event loop.
 *
 * The main thread reaches it through `@effect/sql-pg` like any PostgreSQL server: each connection
 * is a MessagePort carrying the raw wire protocol (`embedded-database.ts` wraps the other end in a
 * Duplex for `PgClientConfig.stream`). Statements from all connections run one at a time (PGlite
 * has one backend); while one connection holds a transaction open, the others' messages wait.
 *
 * Messages with the parent (`parentPort`):
 * - in:  `{ type: "open", data }` (a thread started early: its settings, first and once),
 *        `{ type: "connect", port }` (a new connection), `{ type: "stop" }` (close cleanly)
 * - out: `{ type: "ready", module, compiled }`, `{ type: "failed", message }`, `{ type: "stopped" }`,
 *        `{ type: "disk-full" }` (a statement was refused for a full disk: `disk-reserve.ts`)
 */
import { PGlite } from "@electric-sql/pglite"
import { readFileSync } from "node:fs"
import { type MessagePort, parentPort, workerData } from "node:worker_threads"
import type { EARLY_START } from "./embedded-thread.ts"
import { int32, refusedForDiskFull } from "./wire-errors.ts"

export interface EmbeddedWorkerData {
  /**
   * `initialize`: create the database (initdb) and exit. A new data directory is made by a second,
   * in-memory PGlite and copied over as a tar; run in a thread of its own, all of that memory goes
   * back to the system when the thread ends instead of lingering beside the serving database.
   */
  readonly mode: "initialize" | "serve"
  /** The PGlite data directory (`<data dir>/pglite`). */
  readonly pgDir: string
  /** Postgres settings (`name=value`) on top of PGlite's defaults; they bound its memory. */
  readonly settings: ReadonlyArray<string>
  /** initdb options for a new data directory. */
  readonly initdbOptions: ReadonlyArray<string>
  /** The most WASM memory (Postgres' whole address space) the database may grow to. */
  readonly maxWasmMemoryMb: number
  /**
   * PGlite's WASM module as an earlier thread of this process compiled it (handed back with its
   * `ready`), so this one does not compile again what Postgres' start calls (`embedded-database.ts`).
   * Not part of the settings (`sameWorkerData`).
   */
  readonly module?: WebAssembly.Module | undefined
}

export type ToDatabaseWorker =
  | { readonly type: "connect"; readonly port: MessagePort }
  | { readonly type: "stop" }
  /** To a thread started early (`embedded-thread.ts`): its settings; it opens the database. */
  | { readonly type: "open"; readonly data: EmbeddedWorkerData }
export type FromDatabaseWorker =
  /** Open; with the compiled WASM module, for the parent to give the next thread, and whether this thread compiled it. */
  | { readonly type: "ready"; readonly module: WebAssembly.Module; readonly compiled: boolean }
  | { readonly type: "initialized" }
  | { readonly type: "failed"; readonly message: string }
  | { readonly type: "stopped" }
  /** A statement was refused with SQLSTATE 53100 (disk full): the parent frees its disk reserve. */
  | { readonly type: "disk-full" }

const SSL_REQUEST = 80877103
const PROTOCOL_3 = 196608
const TERMINATE = 0x58 // 'X'

/** One client connection: reassembles wire messages from its port's chunks. */
interface Connection {
  readonly id: number
  readonly port: MessagePort
  /** Bytes received and not yet framed into whole messages. */
  pending: Uint8Array
  /** Whole messages waiting for the backend, in order. */
  readonly queue: Array<Uint8Array>
  started: boolean
  closed: boolean
}

const concat = (a: Uint8Array, b: Uint8Array) => {
  if (a.length === 0) return b
  const out = new Uint8Array(a.length + b.length)
  out.set(a, 0)
  out.set(b, a.length)
  return out
}

/** Sends bytes to the client: a copy the size of the answer, its buffer transferred (no second copy). */
const send = (connection: Connection, bytes: Uint8Array) => {
  if (connection.closed || bytes.length === 0) return
  const own = bytes.byteOffset === 0 && bytes.byteLength === bytes.buffer.byteLength ? bytes : bytes.slice()
  connection.port.postMessage(own, [own.buffer as ArrayBuffer])
}

const serve = (db: PGlite) => {
  const connections = new Map<number, Connection>()
  let nextId = 1
  /** The connection whose transaction is open in the backend, if any: only it may run until it ends. */
  let owner: number | undefined
  let running = false
  let stopping = false

  /**
   * Runs wire messages through the backend and returns its answer. The raw stream variant hands us
   * the answer's bytes as produced, without PGlite also parsing them into result objects (its
   * default handler does); it runs synchronously, so the chunks are complete when it returns.
   */
  const execute = (input: Uint8Array): Uint8Array => {
    const chunks: Array<Uint8Array> = []
    let size = 0
    db.execProtocolRawStream(input, {
      syncToFs: false,
      onRawData: (bytes) => {
        chunks.push(bytes.slice()) // a view into WASM memory: copy before the next statement overwrites it
        size += bytes.length
      }
    }).catch(fail)
    if (chunks.length === 1) return chunks[0]!
    const out = new Uint8Array(size)
    let at = 0
    for (const chunk of chunks) {
      out.set(chunk, at)
      at += chunk.length
    }
    return out
  }

  /**
   * Splits a connection's pending bytes into whole messages. The first message of a connection is
   * a startup packet (no type byte) or an SSL/cancel request; the rest are `type, int32 length`.
   */
  const frame = (connection: Connection) => {
    let bytes = connection.pending
    while (bytes.length >= 5) {
      if (!connection.started) {
        if (bytes.length < 8) break
        const length = int32(bytes, 0)
        if (bytes.length < length) break
        const code = int32(bytes, 4)
        const message = bytes.subarray(0, length)
        bytes = bytes.subarray(length)
        if (code === SSL_REQUEST) {
          // No TLS over a port: answer "N" and the client goes on in the clear.
          send(connection, Uint8Array.of(0x4e))
        } else if (code === PROTOCOL_3) {
          connection.started = true
          connection.queue.push(message)
        } else {
          // A cancel request (80877102) has no backend process to signal here and expects no
          // answer; anything else is not the protocol. Either way the connection ends.
          close(connection)
          return
        }
        continue
      }
      const length = 1 + int32(bytes, 1)
      if (bytes.length < length) break
      if (bytes[0] === TERMINATE) {
        close(connection)
        return
      }
      connection.queue.push(bytes.subarray(0, length))
      bytes = bytes.subarray(length)
    }
    connection.pending = bytes.length === 0 ? new Uint8Array(0) : bytes
  }

  /** The next connection allowed to run: the transaction's owner, else the first with work. */
  const nextRunnable = (): Connection | undefined => {
    if (owner !== undefined) {
      const holder = connections.get(owner)
      if (holder !== undefined && holder.queue.length > 0) return holder
      if (holder !== undefined) return undefined
      owner = undefined
    }
    for (const connection of connections.values()) if (connection.queue.length > 0) return connection
    return undefined
  }

  /**
   * Runs queued messages until none may run. The startup packet goes alone (its first byte, the high
   * byte of its length, is 0); a connection's typed messages go in one call (PGlite's backend loop
   * consumes every message of its input).
   */
  const drain = () => {
    if (running) return
    running = true
    try {
      for (let connection = nextRunnable(); connection !== undefined; connection = nextRunnable()) {
        const batch = connection.queue.splice(0, connection.queue[0]![0] === 0 ? 1 : connection.queue.length)
        let input = batch[0]!
        for (let i = 1; i < batch.length; i++) input = concat(input, batch[i]!)
        const answer = execute(input)
        if (refusedForDiskFull(answer)) post({ type: "disk-full" })
        send(connection, answer)
        owner = db.isInTransaction() ? connection.id : undefined
      }
    } catch (error) {
      // The backend itself failed (not an SQL error, which is an answer): this thread cannot go on.
      fail(error)
    } finally {
      running = false
    }
  }

  const close = (connection: Connection) => {
    if (connection.closed) return
    connection.closed = true
    connections.delete(connection.id)
    connection.port.close()
    // A client gone mid-transaction must not leave the backend inside it for everyone else.
    if (owner === connection.id) {
      owner = undefined
      if (db.isInTransaction()) execute(simpleQuery("ROLLBACK"))
    }
    drain()
  }

  const connect = (port: MessagePort) => {
    const connection: Connection = { id: nextId++, port, pending: new Uint8Array(0), queue: [], started: false, closed: false }
    if (stopping) {
      port.close()
      return
    }
    connections.set(connection.id, connection)
    port.on("message", (chunk: Uint8Array) => {
      if (connection.closed) return
      connection.pending = concat(connection.pending, chunk)
      frame(connection)
      drain()
    })
    port.on("close", () => close(connection))
  }

  const stop = async () => {
    stopping = true
    for (const connection of [...connections.values()]) close(connection)
    await db.close()
  }

  return { connect, stop }
}

/** A simple-protocol Query message. */
const simpleQuery = (sql: string) => {
  const text = new TextEncoder().encode(`${sql}\0`)
  const out = new Uint8Array(5 + text.length)
  out[0] = 0x51 // 'Q'
  new DataView(out.buffer).setInt32(1, 4 + text.length)
  out.set(text, 5)
  return out
}

const post = (message: FromDatabaseWorker) => parentPort!.postMessage(message)

const fail = (error: unknown): never => {
  post({ type: "failed", message: error instanceof Error ? error.message : String(error) })
  // Exiting makes the parent see the failure at once and restart a fresh thread.
  process.exit(1)
}

/**
 * PGlite creates its WASM memory with a 2 GiB maximum and has no option to lower it. This thread's
 * `WebAssembly.Memory` (its own isolate's; the main thread's is untouched) caps the maximum, so a
 * runaway statement gets "out of memory" from Postgres instead of growing the process without end.
 */
const capWasmMemory = (maxMb: number) => {
  const Memory = WebAssembly.Memory
  const pages = Math.floor((maxMb * 1024 * 1024) / 65536)
  const Capped = function(descriptor: WebAssembly.MemoryDescriptor) {
    return new Memory({ ...descriptor, maximum: Math.max(descriptor.initial, Math.min(descriptor.maximum ?? pages, pages)) })
  }
  ;(WebAssembly as { Memory: unknown }).Memory = Capped
}

/** PGlite's WASM module, compiled (V8's tiering rule is the process's: `embedded-thread.ts`). */
const compilePglite = () => WebAssembly.compile(readFileSync(new URL("pglite.wasm", import.meta.resolve("@electric-sql/pglite"))))

/**
 * A thread started early compiles PGlite's WASM while it waits for its settings (the `open`
 * message): the work that needs no settings is done by the time the database layer asks.
 */
const settingsOfEarlyThread = async (): Promise<{ data: EmbeddedWorkerData; module: WebAssembly.Module }> => {
  const data = new Promise<EmbeddedWorkerData>((resolve) => {
    parentPort!.once("message", (message: ToDatabaseWorker) => {
      if (message.type === "open") resolve(message.data)
      else fail(new Error(`a database thread started early was sent ${message.type} before open`))
    })
  })
  const module = await compilePglite()
  return { data: await data, module }
}

const main = async () => {
  const start = workerData as EmbeddedWorkerData | typeof EARLY_START
  const compiled = start.mode === "early" || start.module === undefined
  const { data, module } = start.mode === "early"
    ? await settingsOfEarlyThread()
    : { data: start, module: start.module ?? await compilePglite() }
  capWasmMemory(data.maxWasmMemoryMb)
  const db = await PGlite.create({
    pgliteWasmModule: module,
    dataDir: data.pgDir,
    startParams: [...PGlite.defaultStartParams, ...data.settings.flatMap((setting) => ["-c", setting])],
    initDbStartParams: [...data.initdbOptions]
  })
  if (data.mode === "initialize") {
    await db.close()
    post({ type: "initialized" })
    parentPort!.close()
    return
  }
  const server = serve(db)
  parentPort!.on("message", (message: ToDatabaseWorker) => {
    if (message.type === "connect") server.connect(message.port)
    else if (message.type === "stop") {
      server.stop().then(
        () => {
          post({ type: "stopped" })
          parentPort!.close()
        },
        fail
      )
    }
  })
  post({ type: "ready", module, compiled })
}

main().catch(fail)
