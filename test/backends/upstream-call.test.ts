/**
 * `callWhole` and `callStreamed` (src/backends/upstream/upstream-call.ts) against a real node:http
 * server on an undici Pool: bodies whole and chunked, errors mid-body, aborts before and during a
 * call, backpressure (a reader that stops reading stops the socket, and the server sees its
 * writes back up), and the promise-free `read()` the stream stages use.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http"
import type { AddressInfo } from "node:net"
import { Readable } from "node:stream"
import { Effect } from "effect"
import { Pool } from "undici"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { RELEASED_BODY_CHARS, requestBody, sendable } from "../../src/backends/upstream/upstream-body.ts"
import { bodyText, callStreamed, callWhole, errorText, MAX_ANSWER_VALUES, parseWholeJson, type StreamedBody } from "../../src/backends/upstream/upstream-call.ts"
import { LARGE_BODY_BYTES, MAX_JSON_KEY_CHARS } from "../../src/util/json-limits.ts"
import { exposedGc } from "../support/gc.ts"

/** Blocks of 4 KiB, each its own number over and over: any loss or reordering shows. */
const NUMBERED_BLOCKS = 600
const numberedBlock = (i: number) => Buffer.alloc(4096, `${String(i).padStart(4, "0")},`)

let server: Server
let pool: Pool
/** Bytes the server managed to hand to its socket in /endless before a write reported backpressure. */
const endless = { writtenBeforeFull: 0, closed: false }

const routes: Record<string, (req: IncomingMessage, res: ServerResponse) => void> = {
  "/echo": (req, res) => {
    const chunks: Array<Buffer> = []
    req.on("data", (c: Buffer) => chunks.push(c))
    req.on("end", () => {
      res.writeHead(201, { "content-type": "application/json", "x-seen": req.headers["x-test"] ?? "" })
      res.end(JSON.stringify({ got: Buffer.concat(chunks).toString("utf8") }))
    })
  },
  "/chunks": (_req, res) => {
    res.writeHead(200, { "content-type": "text/event-stream" })
    let i = 0
    const next = () => {
      if (i === 5) return res.end()
      res.write(`data: ${i++} é\n\n`)
      setTimeout(next, 5)
    }
    next()
  },
  "/broken": (_req, res) => {
    res.writeHead(200, { "content-type": "text/event-stream" })
    res.write("data: first\n\n")
    setTimeout(() => res.socket?.destroy(), 20)
  },
  "/early-hints": (_req, res) => {
    res.writeEarlyHints({ link: "</style.css>; rel=preload; as=style" })
    setTimeout(() => {
      res.writeHead(200, { "content-type": "text/event-stream" })
      res.end("data: after hints\n\n")
    }, 10)
  },
  "/numbered": (_req, res) => {
    res.writeHead(200, { "content-type": "application/octet-stream" })
    let i = 0
    const pump = () => {
      while (i < NUMBERED_BLOCKS) {
        if (!res.write(numberedBlock(i++))) return void res.once("drain", pump)
      }
      res.end()
    }
    pump()
  },
  /** Reads the whole request, then answers with its byte count and holds the answer open. */
  "/hold": (req, res) => {
    let received = 0
    req.on("data", (c: Buffer) => (received += c.length))
    req.on("end", () => {
      res.writeHead(200, { "content-type": "text/event-stream", "x-received": String(received) })
      res.write("data: open\n\n")
    })
  },
  "/never": () => {
    // never answers: only an abort ends the call
  },
  "/endless": (_req, res) => {
    res.writeHead(200, { "content-type": "application/octet-stream" })
    const block = Buffer.alloc(64 * 1024, 120)
    res.on("close", () => (endless.closed = true))
    const pump = () => {
      while (!res.destroyed) {
        endless.writtenBeforeFull += block.length
        if (!res.write(block)) return void res.once("drain", pump)
      }
    }
    pump()
  }
}

beforeAll(async () => {
  server = createServer((req, res) => routes[req.url ?? ""]!(req, res))
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  pool = new Pool(`http://127.0.0.1:${(server.address() as AddressInfo).port}`)
})

afterAll(async () => {
  await pool.destroy()
  server.closeAllConnections()
  await new Promise((resolve) => server.close(resolve))
})

describe("callWhole", () => {
  it("sends the body and headers, and reads status, headers and the whole text", async () => {
    const answer = await callWhole(pool, { method: "POST", path: "/echo", headers: { "x-test": "yes" }, body: "héllo" })
    expect(answer.status).toBe(201)
    expect(answer.headers["x-seen"]).toBe("yes")
    expect(JSON.parse(bodyText(answer))).toEqual({ got: "héllo" })
  })

  it("sends a body given as a stream of chunks", async () => {
    const body = Readable.from([Buffer.from("ab"), Buffer.from("cd")], { objectMode: false })
    const answer = await callWhole(pool, { method: "POST", path: "/echo", headers: { "content-length": "4" }, body })
    expect(JSON.parse(bodyText(answer))).toEqual({ got: "abcd" })
  })

  it("joins a body that arrives in many chunks, multi-byte characters included", async () => {
    const answer = await callWhole(pool, { method: "POST", path: "/chunks", headers: {}, body: "" })
    expect(bodyText(answer)).toBe([0, 1, 2, 3, 4].map((i) => `data: ${i} é\n\n`).join(""))
  })

  it("skips an informational answer (103 Early Hints) and reads the final one", async () => {
    const whole = await callWhole(pool, { method: "POST", path: "/early-hints", headers: {}, body: "" })
    expect([whole.status, bodyText(whole)]).toEqual([200, "data: after hints\n\n"])
    const streamed = await callStreamed(pool, { method: "POST", path: "/early-hints", headers: {}, body: "" })
    expect([streamed.statusCode, await streamed.body.text()]).toEqual([200, "data: after hints\n\n"])
  })

  it("rejects when the connection breaks mid-body", async () => {
    await expect(callWhole(pool, { method: "POST", path: "/broken", headers: {}, body: "" })).rejects.toThrow()
  })

  it("an abort ends a call that never answers, and an aborted signal stops one before it starts", async () => {
    const abort = new AbortController()
    const call = callWhole(pool, { method: "POST", path: "/never", headers: {}, body: "" }, abort.signal)
    setTimeout(() => abort.abort(new Error("client gone")), 30)
    await expect(call).rejects.toThrow("client gone")
    await expect(callWhole(pool, { method: "POST", path: "/echo", headers: {}, body: "" }, abort.signal)).rejects.toThrow("client gone")
  })
})

describe("callStreamed", () => {
  it("yields the chunks as they arrive and ends", async () => {
    const response = await callStreamed(pool, { method: "POST", path: "/chunks", headers: {}, body: "" })
    expect(response.statusCode).toBe(200)
    expect(response.headers["content-type"]).toBe("text/event-stream")
    const parts: Array<string> = []
    for await (const chunk of response.body) parts.push(Buffer.from(chunk).toString("utf8"))
    expect(parts.length).toBeGreaterThan(1)
    expect(parts.join("")).toBe([0, 1, 2, 3, 4].map((i) => `data: ${i} é\n\n`).join(""))
  })

  it("read() answers at once when a chunk is there, else when one arrives; then the end, or the failure", async () => {
    type Read = Parameters<Parameters<StreamedBody["read"]>[0]>[0]
    const readAll = (body: StreamedBody) =>
      new Promise<{ parts: Array<string>; last: Read; waited: number }>((resolve) => {
        const parts: Array<string> = []
        let waited = 0
        const step = () => {
          let sync = true
          body.read((result) => {
            if (!sync) waited++
            if (result._tag === "Chunk") {
              parts.push(Buffer.from(result.chunk).toString("utf8"))
              step()
            } else resolve({ parts, last: result, waited })
          })
          sync = false
        }
        step()
      })
    const chunks = await readAll((await callStreamed(pool, { method: "POST", path: "/chunks", headers: {}, body: "" })).body)
    expect(chunks.parts.join("")).toBe([0, 1, 2, 3, 4].map((i) => `data: ${i} é\n\n`).join(""))
    expect(chunks.last._tag).toBe("End")
    // The server writes every 5 ms: most reads had to wait for their chunk.
    expect(chunks.waited).toBeGreaterThan(1)
    const broken = await readAll((await callStreamed(pool, { method: "POST", path: "/broken", headers: {}, body: "" })).body)
    expect(broken.parts.join("")).toBe("data: first\n\n")
    expect(broken.last._tag).toBe("Failed")
  })

  it("a reader far behind (the socket paused) still gets every byte, in order, each chunk once", async () => {
    // Each read waits a few ms before the next, so chunks pile up past the high-water mark and the
    // socket pauses; taking them resumes it, which can deliver more data at once, in that call.
    const response = await callStreamed(pool, { method: "POST", path: "/numbered", headers: {}, body: "" })
    const received: Array<Buffer> = []
    let reads = 0
    await new Promise<void>((resolve, reject) => {
      const step = () =>
        response.body.read((result) => {
          reads++
          if (result._tag === "Chunk") {
            received.push(Buffer.from(result.chunk))
            setTimeout(step, reads % 4 === 0 ? 8 : 0)
          } else if (result._tag === "End") resolve()
          else reject(result.error)
        })
      step()
    })
    const expected = Buffer.concat(Array.from({ length: NUMBERED_BLOCKS }, (_, i) => numberedBlock(i)))
    const got = Buffer.concat(received)
    expect(got.length).toBe(expected.length)
    expect(got.equals(expected)).toBe(true)
  })

  it("text() reads the rest of the body", async () => {
    const response = await callStreamed(pool, { method: "POST", path: "/echo", headers: {}, body: "x" })
    expect(JSON.parse(await response.body.text())).toEqual({ got: "x" })
  })

  it("a connection that breaks mid-body fails the iteration after what did arrive", async () => {
    const response = await callStreamed(pool, { method: "POST", path: "/broken", headers: {}, body: "" })
    const parts: Array<string> = []
    await expect((async () => {
      for await (const chunk of response.body) parts.push(Buffer.from(chunk).toString("utf8"))
    })()).rejects.toThrow()
    expect(parts.join("")).toBe("data: first\n\n")
  })

  it("an abort before the headers rejects the call", async () => {
    const abort = new AbortController()
    const call = callStreamed(pool, { method: "POST", path: "/never", headers: {}, body: "" }, abort.signal)
    setTimeout(() => abort.abort(new Error("deadline")), 30)
    await expect(call).rejects.toThrow("deadline")
  })

  it("pauses the socket while the reader is behind, and destroy() ends the call", async () => {
    endless.writtenBeforeFull = 0
    endless.closed = false
    const response = await callStreamed(pool, { method: "POST", path: "/endless", headers: {}, body: "" })
    const iterator = response.body[Symbol.asyncIterator]()
    await iterator.next()
    // Unread: the client stops reading, so the server's writes back up and stop.
    await expect.poll(() => endless.writtenBeforeFull, { timeout: 5_000 }).toBeGreaterThan(0)
    let settled = -1
    await expect.poll(async () => {
      const now = endless.writtenBeforeFull
      const same = now === settled
      settled = now
      await new Promise((resolve) => setTimeout(resolve, 50))
      return same && now === endless.writtenBeforeFull
    }, { timeout: 5_000 }).toBe(true)
    // Far less than an unpaused reader would have taken in the same time (hundreds of MiB).
    expect(endless.writtenBeforeFull).toBeLessThan(64 * 1024 * 1024)
    response.body.destroy()
    await expect.poll(() => endless.closed, { timeout: 5_000 }).toBe(true)
    await expect(iterator.next()).rejects.toThrow()
  })
})

describe("a call's request body", () => {
  /** A distinct body of about `kib` KiB with multi-byte characters (its UTF-8 length differs from its length). */
  const bodyOf = (i: number, kib: number) => `{"n":${i},"text":"${"é harbor at dawn ".repeat(Math.ceil((kib * 1024) / 17))}"}`

  it("goes out whole, with its UTF-8 length, small or large", async () => {
    for (const text of ["{\"small\":\"é\"}", bodyOf(1, 20), bodyOf(2, 300)]) {
      const { body, headers } = requestBody(sendable(text), {})
      const answer = await callWhole(pool, { method: "POST", path: "/echo", headers, body })
      expect(JSON.parse(bodyText(answer))).toEqual({ got: text })
      if (text.length >= RELEASED_BODY_CHARS) expect(headers["content-length"]).toBe(String(Buffer.byteLength(text)))
    }
  })

  it("is not held by the call once sent, however long the answer streams", async () => {
    // V8's gc() in this process, so the measure is of what is still referenced.
    const gc = exposedGc()
    const calls = 40
    const kib = 64
    const holdPool = new Pool(`http://127.0.0.1:${(server.address() as AddressInfo).port}`, { connections: calls })
    try {
      gc()
      const before = process.memoryUsage().arrayBuffers
      const open: Array<{ readonly body: StreamedBody; readonly received: string }> = []
      for (let i = 0; i < calls; i++) {
        // Built and dropped here: only the call could keep the body's bytes.
        const { body, headers } = requestBody(sendable(bodyOf(i, kib)), {})
        const response = await callStreamed(holdPool, { method: "POST", path: "/hold", headers, body })
        open.push({ body: response.body, received: String(response.headers["x-received"]) })
      }
      expect(open.every(({ received }, i) => received === String(Buffer.byteLength(bodyOf(i, kib))))).toBe(true)
      gc()
      gc()
      // Undici given the string kept its UTF-8 copy for as long as the answer streamed: ~40 × 64 KiB.
      const grownKiB = (process.memoryUsage().arrayBuffers - before) / 1024
      expect(grownKiB).toBeLessThan((calls * kib) / 4)
      for (const { body } of open) body.destroy()
    } finally {
      await holdPool.destroy()
    }
  })
})

describe("a whole answer's JSON (parseWholeJson, errorText)", () => {
  /** An answer as `callWhole` gives it: the text's bytes cut into chunks of `size`. */
  const answerOf = (text: string, size = 7_001) => {
    const bytes = Buffer.from(text)
    const chunks: Array<Buffer> = []
    for (let at = 0; at < bytes.length; at += size) chunks.push(bytes.subarray(at, at + size))
    return { status: 200, headers: {}, chunks, bytes: bytes.length }
  }

  it("parses a large answer in slices, yielding to the event loop, to what JSON.parse makes", async () => {
    // Multi-byte characters cut across chunks, and enough values to take several slices.
    const value = { id: "x", items: Array.from({ length: 60_000 }, (_, i) => ({ i, s: `é😀${i}` })) }
    const text = JSON.stringify(value)
    expect(text.length).toBeGreaterThan(LARGE_BODY_BYTES)
    let turns = 0
    const tick = setInterval(() => turns++, 0)
    try {
      expect(await Effect.runPromise(parseWholeJson(answerOf(text)))).toEqual(value)
    } finally {
      clearInterval(tick)
    }
    expect(turns).toBeGreaterThan(0)
    // A small one at once, the same value.
    expect(await Effect.runPromise(parseWholeJson(answerOf(`{"a":[1,"é"]}`, 3)))).toEqual({ a: [1, "é"] })
  })

  it("refuses a body that is not JSON, and one of more values than any answer holds, as 502s", async () => {
    const refusal = (text: string) => Effect.runPromise(Effect.flip(parseWholeJson(answerOf(text))))
    for (const text of ["", "   ", `{"a":`, "x".repeat(LARGE_BODY_BYTES + 1), `{"a":"${"b".repeat(LARGE_BODY_BYTES)}"`]) {
      expect(await refusal(text)).toMatchObject({ status: 502, message: "The upstream answered with a body that is not JSON" })
    }
    // The value limit (MAX_ANSWER_VALUES by default; a smaller one here, to build less), on a large answer.
    const limit = 100_000
    const values = (n: number) => `[${new Array(n - 1).fill("0").join(",")}]` // n - 1 numbers and the array
    expect(await Effect.runPromise(Effect.flip(parseWholeJson(answerOf(values(limit + 1)), limit))))
      .toMatchObject({ status: 502, message: `The upstream's answer holds more than ${limit} JSON values` })
    expect(await Effect.runPromise(Effect.map(parseWholeJson(answerOf(values(limit)), limit), (v) => (v as Array<number>).length))).toBe(limit - 1)
    expect(MAX_ANSWER_VALUES).toBe(1_000_000)
    // A key no request may send either (V8 would hash and copy it in one step), as its own 502.
    expect(await refusal(`{"${"k".repeat(MAX_JSON_KEY_CHARS + 1)}":1}`))
      .toMatchObject({ status: 502, message: `The upstream's answer has an object key longer than the limit of ${MAX_JSON_KEY_CHARS} characters` })
  })

  it("reads only the head of a large error body", () => {
    const message = `{"error":{"message":"slow down"}}`
    expect(errorText(answerOf(message))).toBe(message)
    const huge = errorText(answerOf(`${message}${" ".repeat(1 << 20)}`))
    expect(huge.startsWith(message)).toBe(true)
    expect(huge.length).toBe(64 * 1024)
  })
})
