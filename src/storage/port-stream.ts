/**
 * One client connection's end of its MessagePort to the embedded database worker, as the stream
 * `@effect/sql-pg` reads and writes (`embedded-database.ts`; an artifact parse worker uses one for
 * its own connection). Its own file: a worker loads it without the rest of the database module.
 */
import { Duplex } from "node:stream"
import type { MessagePort } from "node:worker_threads"

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
    // A copy of exactly the statement's bytes, handed over (Buffers often share a larger pool slab).
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
