/**
 * Runs in a parse worker (`parse-worker.ts`), loaded only when a large content is coming: writes the
 * content's data on the worker's own connections, with the statements the repository uses
 * (`row-sql.ts`).
 *
 * Why not on the event loop: encoding a batch copies its megabytes two or three times into fresh
 * buffers (the protocol writer's, the socket frame), 70–87 MiB per 100,000-row upload. V8 answers
 * that much off-heap garbage with full collections of the gateway's whole heap (4–12 per upload,
 * 6–46 ms pauses) and forced marking steps of 5–10 ms, which held every other request for tens of
 * milliseconds (bench/artifacts.ts, --trace-gc). Here the garbage is the worker's, whose heap
 * holds only the upload, and no other request waits on it.
 */
import { PgClient } from "@effect/sql-pg"
import { Effect, Exit, ManagedRuntime, Redacted } from "effect"
import { SqlClient } from "effect/sql"
import { Duplex } from "node:stream"
import type { MessagePort } from "node:worker_threads"
import { PortStream } from "../storage/port-stream.ts"
import type { Piece } from "./row-batches.ts"
import { rowStatements } from "./row-sql.ts"
import type { WriteFailure, WriteTarget } from "./worker-protocol.ts"

export interface RowWriter {
  /**
   * Writes every piece; undefined when all are stored, else why not. The connections stay open
   * for the worker's next upload (closed after `IDLE_CONNECTION` unused).
   * `stop` cancels the statements running (the server stops them before this resolves), so
   * no row of an abandoned upload lands after the sweeper has removed its content.
   */
  write(contentId: string, pieces: Iterator<Piece>, stop: AbortSignal): Promise<WriteFailure | undefined>
}

/** A PostgreSQL connection of a kept worker closes after this long unused. */
const IDLE_CONNECTION = "30 seconds"

const failureOf = (error: unknown): WriteFailure => {
  // A SqlError keeps the server's error (with its SQLSTATE) as the cause of its reason.
  const reason = (error as { readonly reason?: { readonly cause?: unknown } } | undefined)?.reason
  const code = (reason?.cause as { readonly code?: unknown } | undefined)?.code
  return { code: typeof code === "string" ? code : undefined, message: error instanceof Error ? error.message : String(error) }
}

/** The embedded database's connection: its one port; a reconnection fails (the port is gone with the first). */
const portOnce = (port: MessagePort) => {
  let used = false
  return (): Duplex => {
    if (!used) {
      used = true
      return new PortStream(port)
    }
    const closed = new Duplex({ read() {}, write(_chunk, _encoding, callback) { callback() } })
    process.nextTick(() => closed.destroy(new Error("the embedded database connection of this upload closed")))
    return closed
  }
}

/** Opens the connections at once, so they are ready by the time the content is parsed. */
export const openRowWriter = (target: WriteTarget): RowWriter => {
  const width = target.kind === "postgres" ? target.width : 1
  const runtime = ManagedRuntime.make(PgClient.layer(target.kind === "postgres"
    ? {
      url: Redacted.make(target.url),
      maxConnections: width,
      idleTimeout: IDLE_CONNECTION,
      maxMessageSize: target.maxMessageSize,
      applicationName: "gateway artifact upload",
      ...target.guards,
      ...(target.connectTimeoutMs === undefined ? {} : { connectTimeout: target.connectTimeoutMs })
    }
    : { stream: portOnce(target.port), ssl: false, username: "postgres", database: "postgres", maxConnections: 1, maxMessageSize: target.maxMessageSize }))
  const ping = Effect.flatMap(SqlClient.SqlClient, (sql) => sql`SELECT 1`)
  const warm = runtime.runPromiseExit(Effect.all(Array.from({ length: width }, () => ping), { concurrency: "unbounded" }))

  const store = (contentId: string, pieces: Iterator<Piece>) =>
    Effect.gen(function*() {
      const { insertPiece } = rowStatements(yield* SqlClient.SqlClient)
      // Each lane takes the next piece as soon as its own statement is done: no connection waits
      // for another, and at most `width` batches are in memory besides the parse.
      const lane = Effect.gen(function*() {
        for (let next = pieces.next(); next.done !== true; next = pieces.next()) yield* insertPiece(contentId, next.value)
      })
      yield* Effect.all(Array.from({ length: width }, () => lane), { concurrency: width, discard: true })
    })

  return {
    write: async (contentId, pieces, stop) => {
      await warm
      const exit = await runtime.runPromiseExit(store(contentId, pieces), { signal: stop })
      if (Exit.isSuccess(exit)) return undefined
      const error = exit.cause.reasons.find((r) => r._tag === "Fail" || r._tag === "Die")
      return failureOf(error === undefined ? new Error("the write was interrupted") : error._tag === "Fail" ? error.error : error.defect)
    }
  }
}
