/**
 * One client connection's end of its MessagePort to the embedded database worker, as the stream
 * `@effect/sql-pg` reads and writes (`embedded-database.ts`; an artifact parse worker uses one for
 * its own connection). Its own file: a worker loads it without the rest of the database module.
 */
import { Duplex } from "node:stream"
import type { MessagePort } from "node:worker_threads"

/** From this size on, a statement whose buffer is its own is handed over without a copy (Node's pool slabs are 8 KiB). */
const OWN_BUFFER_BYTES = 64 * 1024

/** One client connection's end of its MessagePort, as the stream `@effect/sql-pg` reads and writes. */
export class PortStream extends Duplex {
  readonly port: MessagePort
  constructor(port: MessagePort) {
    super()
    this.port = port
    port.on("message", (bytes: Uint8Array) => this.push(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength)))
    port.once("close", () => {
      if (!this.destroyed) this.destroy(new Error("the embedded database closed the connection"))
    })
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
