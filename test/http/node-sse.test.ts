/**
 * The SSE writer the request's fiber runs over node:http (src/http/node-sse.ts), on a real server
 * and client: every byte arrives in order, and a client that stops reading stops the pulling (the
 * body is not buffered in memory behind a slow reader).
 */
import { describe, expect, it } from "@effect/vitest"
import { Cause, Effect, Stream } from "effect"
import { createServer, get, type IncomingMessage } from "node:http"
import type { AddressInfo } from "node:net"
import { writeSse } from "../../src/http/node-sse.ts"

const CHUNK_BYTES = 256 * 1024
// 32 MiB: more than the loopback socket buffers (a few MiB) can hold while the client waits.
const CHUNKS = 128

describe("node-sse writeSse", () => {
  it.live("writes every chunk in order, and stops pulling while the client does not read", () =>
    Effect.gen(function*() {
      let pulled = 0
      // One chunk per pull, made when pulled.
      const body = Stream.fromPull(Effect.succeed(Effect.suspend(() => {
        if (pulled === CHUNKS) return Cause.done()
        const chunk = new Uint8Array(CHUNK_BYTES).fill(pulled % 251)
        pulled++
        return Effect.succeed([chunk] as const)
      })))
      const server = createServer((_request, response) => {
        Effect.runFork(Effect.scoped(writeSse(response, { "x-test": "yes" }, body)))
      })
      yield* Effect.acquireRelease(
        Effect.callback<void>((resume) => void server.listen(0, "127.0.0.1", () => resume(Effect.void))),
        () => Effect.sync(() => server.close())
      )
      const port = (server.address() as AddressInfo).port

      const response = yield* Effect.callback<IncomingMessage>((resume) => {
        get(`http://127.0.0.1:${port}/`, (res) => resume(Effect.succeed(res)))
      })
      response.pause()
      expect(response.statusCode).toBe(200)
      expect(response.headers["content-type"]).toBe("text/event-stream")
      expect(response.headers["x-test"]).toBe("yes")
      expect(response.headers["cache-control"]).toBe("no-cache")

      // Wait until the writer has stopped pulling (the buffers are full), then check it stopped short.
      let last = -1
      while (pulled !== last) {
        last = pulled
        yield* Effect.sleep("150 millis")
      }
      expect(pulled).toBeLessThan(CHUNKS)

      const received = yield* Effect.callback<Buffer>((resume) => {
        const parts: Array<Buffer> = []
        response.on("data", (part: Buffer) => parts.push(part))
        response.on("end", () => resume(Effect.succeed(Buffer.concat(parts))))
        response.resume()
      })
      expect(received.length).toBe(CHUNKS * CHUNK_BYTES)
      for (let i = 0; i < CHUNKS; i++) {
        expect(received[i * CHUNK_BYTES]).toBe(i % 251)
        expect(received[(i + 1) * CHUNK_BYTES - 1]).toBe(i % 251)
      }
    }).pipe(Effect.scoped), 30_000)
})
