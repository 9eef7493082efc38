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
import { BackendError, backendErrorFromStatus } from "../../src/backends/backend.ts"
import { type BodyDecoder, decodeBody, decodeWhole } from "../../src/backends/decode-stream.ts"
import { callStreamed } from "../../src/backends/upstream/upstream-call.ts"
import { ssePayloads } from "../../src/backends/upstream/sse.ts"
import type { CanonicalEvent } from "../../src/model/events.ts"
import { makeUsage } from "../../src/model/usage.ts"

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

describe("decodeWhole (a whole answer that came as SSE)", () => {
  const text = (index: number, t: string): CanonicalEvent => ({ type: "text_delta", index, text: t })

  it("feeds the decoder 64 KiB at a time, yielding to the event loop between slices, and finishes the answer", async () => {
    let turns = 0
    const turnsAtFeed: Array<number> = []
    const fed: Array<number> = []
    const decoder: BodyDecoder = {
      feed: (bytes) => {
        fed.push(bytes.length)
        turnsAtFeed.push(turns)
        // Each piece is a slice's worth of work (SLICE_MS is 2): a yield must follow it.
        for (const until = performance.now() + 3; performance.now() < until;);
        return { events: [text(0, "a")] }
      },
      end: () => ({ events: [{ type: "message_stop", stopReason: "end_turn", usage: makeUsage({ outputTokens: 1 }) }] }),
      finish: (events) => Effect.succeed([...events.slice(0, -1), { type: "message_stop", stopReason: "end_turn", usage: makeUsage({ outputTokens: 9 }) }])
    }
    // Counts the event loop's turns (a check phase each) until the decode is done.
    let done = false
    const counter = () => setImmediate(() => {
      turns++
      if (!done) counter()
    })
    counter()
    const events = await Effect.runPromise(decodeWhole([new Uint8Array(100 * 1024), new Uint8Array(150 * 1024)], decoder)).finally(() => (done = true))
    expect(fed).toEqual([65_536, 36_864, 65_536, 65_536, 22_528])
    // The loop turned between every two pieces.
    for (let i = 1; i < turnsAtFeed.length; i++) expect(turnsAtFeed[i]).toBeGreaterThan(turnsAtFeed[i - 1]!)
    expect(events).toHaveLength(6)
    expect(events.at(-1)).toMatchObject({ type: "message_stop", usage: { outputTokens: 9 } })
  })

  it("fails with the first error, after no further piece", async () => {
    let fed = 0
    const decoder: BodyDecoder = {
      feed: () => (++fed === 2 ? { events: [], error: backendErrorFromStatus(502, "broken") } : { events: [] }),
      end: () => ({ events: [] })
    }
    const failed = await Effect.runPromise(Effect.flip(decodeWhole([new Uint8Array(300 * 1024)], decoder)))
    expect(failed).toMatchObject({ status: 502, message: "broken" })
    expect(fed).toBe(2)
  })
})
