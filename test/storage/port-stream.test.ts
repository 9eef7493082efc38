/**
 * A client connection's end of its MessagePort to the embedded database: what is written arrives
 * byte for byte; a large statement that is the whole of its buffer is handed over without a copy
 * (its buffer is detached here), a small one sharing Node's pool slab is copied (the slab stays).
 */
import { Buffer } from "node:buffer"
import { MessageChannel } from "node:worker_threads"
import { describe, expect, it } from "vitest"
import { PortStream } from "../../src/storage/port-stream.ts"

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
})
