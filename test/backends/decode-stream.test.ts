/**
 * `decodeBody` (src/backends/decode-stream.ts) on a real streamed call: an upstream that keeps the
 * connection alive with bytes that complete no event (SSE comments) fails the stream once a pull
 * has waited `noProgressMs`; one whose bytes complete events, however slowly, does not.
 */
import { Effect, Stream } from "effect"
import { createServer, type Server } from "node:http"
import type { AddressInfo } from "node:net"
import { Pool } from "undici"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { BackendError } from "../../src/backends/backend.ts"
import { type BodyDecoder, decodeBody } from "../../src/backends/decode-stream.ts"
import { callStreamed } from "../../src/backends/upstream/upstream-call.ts"
import { ssePayloads } from "../../src/backends/upstream/sse.ts"
import type { CanonicalEvent } from "../../src/model/events.ts"

let server: Server
let pool: Pool

beforeAll(async () => {
  // Writes `: ping` (or an event, on /events) every 20 ms until the client goes.
  server = createServer((req, res) => {
    res.writeHead(200, { "content-type": "text/event-stream" })
    const timer = setInterval(() => res.write(req.url === "/events" ? "data: tick\n\n" : ": ping\n\n"), 20)
    res.on("close", () => clearInterval(timer))
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  pool = new Pool(`http://127.0.0.1:${(server.address() as AddressInfo).port}`)
})

afterAll(async () => {
  await pool.close()
  server.closeAllConnections()
  await new Promise((resolve) => server.close(resolve))
})

/** Each SSE data payload becomes a text delta; comments become nothing. */
const payloadDecoder = (): BodyDecoder => {
  const reader = ssePayloads()
  const text = new TextDecoder()
  return {
    feed: (bytes) => ({ events: reader.feed(text.decode(bytes, { stream: true })).map((data): CanonicalEvent => ({ type: "text_delta", index: 0, text: data })) }),
    end: () => ({ events: [] })
  }
}

const stream = (path: string, noProgressMs: number) =>
  Effect.acquireRelease(
    Effect.promise(() => callStreamed(pool, { path, method: "POST", headers: {}, body: "" })),
    (response) => Effect.sync(() => response.body.destroy())
  ).pipe(Effect.map((response) => decodeBody(response.body, payloadDecoder(), noProgressMs)))

describe("decodeBody", () => {
  it("fails a stream whose bytes keep coming but complete no event, once a pull has waited noProgressMs", async () => {
    const startedAt = performance.now()
    const exit = await Effect.runPromiseExit(Effect.scoped(Effect.flatMap(stream("/pings", 300), Stream.runCollect)))
    expect(exit._tag).toBe("Failure")
    const error = exit._tag === "Failure" ? exit.cause.reasons.find((reason) => reason._tag === "Fail")?.error : undefined
    expect(error).toBeInstanceOf(BackendError)
    expect(error).toMatchObject({ status: 502, retryable: true, message: expect.stringContaining("completed no event in 300 ms") })
    // Not before the deadline: the pings went on for at least that long.
    expect(performance.now() - startedAt).toBeGreaterThanOrEqual(300)
  })

  it("keeps a stream whose events come, for longer than noProgressMs in all", async () => {
    // 30 events at one per 20 ms: ~600 ms in all, twice the deadline, each pull served in time.
    const events = await Effect.runPromise(Effect.scoped(Effect.flatMap(stream("/events", 300), (s) => Stream.runCollect(Stream.take(s, 30)))))
    expect(events).toHaveLength(30)
  })
})
