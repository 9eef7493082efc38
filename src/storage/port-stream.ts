/**
 * One client connection's end of its MessagePort to the embedded database worker, as the stream
 * `@effect/sql-pg` reads and writes (`embedded-database.ts`; an artifact parse worker uses one for
 * its own connection). Its own file: a worker loads it without the rest of the database module.
 */
import { Duplex } from "node:stream"
import type { MessagePort } from "node:worker_threads"

/** From this size on, a statement whose buffer is its own is handed over without a copy (Node's pool slabs are 8 KiB). */
const OWN_BUFFER_BYTES = 64 * 1024

/**
 * The most of an answer handed to the SQL client in one turn of the event loop. The database
 * worker sends an answer whole, and the client parses what it is given at once: a row of
 * megabytes (a run's 15 MB input), or many rows, held the loop tens of milliseconds. A larger
 * answer goes on in pieces (views, not copies), one per turn, so other clients' work runs between.
 */
export const PIECE_BYTES = 256 * 1024

/** One client connection's end of its MessagePort, as the stream `@effect/sql-pg` reads and writes. */
export class PortStream extends Duplex {
  readonly port: MessagePort
  /** Pieces of large answers not handed over yet, in order; while any wait, later bytes queue behind them. */
  private readonly pieces: Array<Buffer> = []
  private closedBy: Error | undefined
  constructor(port: MessagePort) {
    super()
    this.port = port
    port.on("message", (bytes: Uint8Array) => this.received(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength)))
    port.once("close", () => {
      this.closedBy = new Error("the embedded database closed the connection")
      if (this.pieces.length === 0 && !this.destroyed) this.destroy(this.closedBy)
    })
  }
  private received(bytes: Buffer) {
    if (this.pieces.length === 0 && bytes.byteLength <= PIECE_BYTES) {
      this.push(bytes)
      return
    }
    const idle = this.pieces.length === 0
    for (let at = 0; at < bytes.byteLength; at += PIECE_BYTES) this.pieces.push(bytes.subarray(at, at + PIECE_BYTES))
    if (idle) this.nextPiece()
  }
  private readonly nextPiece = () => {
    if (this.destroyed) return
    this.push(this.pieces.shift())
    if (this.pieces.length > 0) setImmediate(this.nextPiece)
    else if (this.closedBy !== undefined) this.destroy(this.closedBy)
  }
  override _read() {}
  override _write(chunk: Buffer, _encoding: BufferEncoding, callback: (error?: Error | null) => void) {
    // A statement's bytes are handed over, not copied, when they are the whole of their memory: a
    // large statement (a run's 16 MiB input) is such a buffer of its own (the SQL client writes
    // each statement once and never reads it again), and copying it took tens of milliseconds.
    // Small ones share a larger pool slab with other Buffers: those are copied, exactly.
    if (chunk.byteLength >= OWN_BUFFER_BYTES && chunk.byteOffset === 0 && chunk.byteLength === chunk.buffer.byteLength) {
      try {
        this.port.postMessage(chunk, [chunk.buffer as ArrayBuffer])
        callback()
        return
      } catch {
        // Not transferable after all (an untransferable buffer): copied below.
      }
    }
    const bytes = new Uint8Array(chunk)
    this.port.postMessage(bytes, [bytes.buffer])
    callback()
  }
  override _final(callback: (error?: Error | null) => void) {
    this.port.close()
    callback()
  }
  override _destroy(error: Error | null, callback: (error?: Error | null) => void) {
    this.port.close()
    callback(error)
  }
}
