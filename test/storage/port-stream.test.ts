/**
 * A client connection's end of its MessagePort to the embedded database: what is written arrives
 * byte for byte; a large statement that is the whole of its buffer is handed over without a copy
 * (its buffer is detached here), a small one sharing Node's pool slab is copied (the slab stays).
 * A large answer is handed to the reader in pieces, one per turn of the event loop, in order.
 */
import { Buffer } from "node:buffer"
import { MessageChannel } from "node:worker_threads"
import { describe, expect, it } from "vitest"
import { PIECE_BYTES, PortStream } from "../../src/storage/port-stream.ts"
import { loopTurnsDuring } from "../support/loop-turns.ts"

const received = (port: MessageChannel["port2"], count: number) =>
  new Promise<Array<Uint8Array>>((resolve) => {
    const messages: Array<Uint8Array> = []
    port.on("message", (bytes: Uint8Array) => {
      messages.push(bytes)
      if (messages.length === count) resolve(messages)
    })
  })

describe("PortStream", () => {
  it("hands a large statement's own buffer over and copies a small pooled one, bytes intact", async () => {
    const { port1, port2 } = new MessageChannel()
    const stream = new PortStream(port1)
    const arriving = received(port2, 2)

    const large = Buffer.allocUnsafe(1 << 20) // its own ArrayBuffer: over Node's pool size
    for (let i = 0; i < large.length; i++) large[i] = i % 251
    const expected = Buffer.from(large)
    const small = Buffer.from("a short statement") // a slice of the shared pool slab
    expect(small.buffer.byteLength).toBeGreaterThan(small.byteLength)

    await new Promise<void>((resolve, reject) => stream.write(large, (error) => (error ? reject(error) : resolve())))
    await new Promise<void>((resolve, reject) => stream.write(small, (error) => (error ? reject(error) : resolve())))
    const [first, second] = await arriving

    expect(Buffer.from(first!).equals(expected)).toBe(true)
    expect(large.byteLength).toBe(0) // transferred, not copied
    expect(Buffer.from(second!).toString()).toBe("a short statement")
    expect(small.toString()).toBe("a short statement") // copied: the slab is untouched
    port2.close()
    stream.destroy()
  })

  it("hands a large answer over in pieces, one per turn, in order, and what follows after it", async () => {
    const { port1, port2 } = new MessageChannel()
    const stream = new PortStream(port1)
    const reads: Array<Buffer> = []
    stream.on("data", (bytes: Buffer) => reads.push(bytes))
    stream.on("error", () => {})
    const large = new Uint8Array(10 * PIECE_BYTES + 123)
    for (let i = 0; i < large.length; i++) large[i] = i % 253
    const expected = Buffer.from(large)
    const { turns } = await loopTurnsDuring(async () => {
      const ended = new Promise<void>((resolve) => stream.on("close", resolve))
      port2.postMessage(large)
      port2.postMessage(Buffer.from("and then a short one"))
      port2.close() // the database goes away: the stream ends only after what it sent
      await ended
    })
    expect(Buffer.concat(reads).equals(Buffer.concat([expected, Buffer.from("and then a short one")]))).toBe(true)
    expect(Math.max(...reads.map((r) => r.byteLength))).toBeLessThanOrEqual(PIECE_BYTES)
    // The pieces are spread over turns, one each: other work runs between them.
    expect(turns).toBeGreaterThanOrEqual(10)
  })
})
