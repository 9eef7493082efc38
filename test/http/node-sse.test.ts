/**
 * The SSE writer over node:http (src/http/node-sse.ts), on a real server and client: every chunk's
 * frames arrive in order, a client that stops reading stops the pulling (the body is not buffered in
 * memory behind a slow reader), a stream that fails ends with its failure's frame, and the scope the
 * events are pulled in is closed by the writer when it ends — not when `writeSse` returns, which it
 * does at once — and at once when the client leaves.
 */
import { describe, expect, it } from "@effect/vitest"
import { Cause, Deferred, Effect, Exit, Scope, Stream } from "effect"
import { createServer, get, type IncomingMessage, type Server } from "node:http"
import type { AddressInfo } from "node:net"
import { type SseFrames, writeSse } from "../../src/http/node-sse.ts"

const CHUNK_BYTES = 256 * 1024
// 32 MiB: more than the loopback socket buffers (a few MiB) can hold while the client waits.
const CHUNKS = 128

describe("node-sse writeSse", () => {
  it.live("writes every chunk in order, and stops pulling while the client does not read", () =>
    Effect.gen(function*() {
      let pulled = 0
      // One chunk per pull, made when pulled: its number, written as CHUNK_BYTES of one letter.
      const events = Stream.fromPull(Effect.succeed(Effect.suspend(() => {
        if (pulled === CHUNKS) return Cause.done()
        return Effect.succeed([pulled++] as const)
      })))
      const frames: SseFrames<number, never> = { chunk: (chunk) => letterOf(chunk[0]).repeat(CHUNK_BYTES), failure: () => "", defect: () => "" }
      const server = createServer((_request, response) => {
        Effect.runFork(writeSse(response, { "x-test": "yes" }, events, frames).pipe(Scope.provide(Scope.makeUnsafe())))
      })
      const port = yield* listen(server)

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
        expect(String.fromCharCode(received[i * CHUNK_BYTES]!)).toBe(letterOf(i))
        expect(String.fromCharCode(received[(i + 1) * CHUNK_BYTES - 1]!)).toBe(letterOf(i))
      }
    }).pipe(Effect.scoped), 30_000)

  it.live("a stream that fails ends with the failure's frame after what it sent; a chunk without frames writes nothing", () =>
    Effect.gen(function*() {
      const events = Stream.concat(Stream.fromArray([1, 0, 2]), Stream.fail("upstream broke"))
      const frames: SseFrames<number, string> = {
        chunk: (chunk) => chunk.map((n) => "data: x\n\n".repeat(n)).join(""),
        failure: (error) => `event: error\ndata: ${error}\n\n`,
        defect: () => "event: error\ndata: internal\n\n"
      }
      // The writer closes the scope when the stream has ended: the finalizer sees the failure's frame sent.
      const closed = Deferred.makeUnsafe<boolean>()
      const server = createServer((_request, response) => {
        const scope = Scope.makeUnsafe()
        Effect.runSync(Scope.addFinalizer(scope, Effect.sync(() => Deferred.doneUnsafe(closed, Exit.succeed(response.writableEnded)))))
        Effect.runFork(writeSse(response, {}, Stream.rechunk(1)(events), frames).pipe(Scope.provide(scope)))
      })
      const port = yield* listen(server)
      const text = yield* bodyOf(port)
      expect(text).toBe("data: x\n\ndata: x\n\ndata: x\n\nevent: error\ndata: upstream broke\n\n")
      expect(yield* Deferred.await(closed)).toBe(true)
    }).pipe(Effect.scoped), 30_000)

  it.live("a client that leaves interrupts the writer, which closes the scope as interrupted and stops pulling", () =>
    Effect.gen(function*() {
      let pulled = 0
      // A chunk now, then nothing more: the stream stays open until the client leaves.
      const events = Stream.fromPull(Effect.succeed(Effect.suspend(() => (pulled++ === 0 ? Effect.succeed([1] as const) : Effect.never))))
      const frames: SseFrames<number, never> = { chunk: () => "data: x\n\n", failure: () => "", defect: () => "" }
      const closed = Deferred.makeUnsafe<Exit.Exit<unknown, unknown>>()
      const server = createServer((_request, response) => {
        const scope = Scope.makeUnsafe()
        Effect.runSync(Scope.addFinalizerExit(scope, (exit) => Effect.sync(() => Deferred.doneUnsafe(closed, Exit.succeed(exit)))))
        Effect.runFork(writeSse(response, {}, events, frames).pipe(Scope.provide(scope)))
      })
      const port = yield* listen(server)
      yield* Effect.callback<void>((resume) => {
        const request = get(`http://127.0.0.1:${port}/`, (res) => res.once("data", () => {
          request.destroy()
          resume(Effect.void)
        }))
      })
      const exit = yield* Deferred.await(closed)
      expect(Exit.isFailure(exit) && Cause.hasInterruptsOnly(exit.cause)).toBe(true)
      expect(pulled).toBe(2)
    }).pipe(Effect.scoped), 30_000)

  it.live("a client already gone when the stream starts: the writer is interrupted at once and closes the scope", () =>
    Effect.gen(function*() {
      const events: Stream.Stream<number> = Stream.fromPull(Effect.succeed(Effect.never))
      const frames: SseFrames<number, never> = { chunk: () => "data: x\n\n", failure: () => "", defect: () => "" }
      const closed = Deferred.makeUnsafe<Exit.Exit<unknown, unknown>>()
      const server = createServer((_request, response) => {
        response.once("close", () => {
          // Its close has been emitted: the writer starts after it.
          const scope = Scope.makeUnsafe()
          Effect.runSync(Scope.addFinalizerExit(scope, (exit) => Effect.sync(() => Deferred.doneUnsafe(closed, Exit.succeed(exit)))))
          Effect.runFork(writeSse(response, {}, events, frames).pipe(Scope.provide(scope)))
        })
        response.destroy()
      })
      const port = yield* listen(server)
      get(`http://127.0.0.1:${port}/`).on("error", () => {})
      const exit = yield* Deferred.await(closed)
      expect(Exit.isFailure(exit) && Cause.hasInterruptsOnly(exit.cause)).toBe(true)
    }).pipe(Effect.scoped), 30_000)

  // A defect (a bug in an encoder, or below it in the events) is not a silent cut either: the
  // stream ends with the dialect's error event, and the scope closes with the defect (logged).
  for (const [where, events, chunk] of [
    ["the encoder throws", Stream.fromArray([1, 2, 3]), (n: number) => {
      if (n === 3) throw new RangeError("Maximum call stack size exceeded")
      return `data: ${n}\n\n`
    }],
    ["the events die", Stream.concat(Stream.fromArray([1, 2]), Stream.die(new Error("a bug"))), (n: number) => `data: ${n}\n\n`]
  ] as const) {
    it.live(`a stream broken by a defect (${where}) ends with the defect's frame after what it sent`, () =>
      Effect.gen(function*() {
        const frames: SseFrames<number, string> = {
          chunk: (c) => c.map(chunk).join(""),
          failure: (error) => `event: error\ndata: ${error}\n\n`,
          defect: () => "event: error\ndata: internal\n\n"
        }
        const closed = Deferred.makeUnsafe<Exit.Exit<unknown, unknown>>()
        const server = createServer((_request, response) => {
          const scope = Scope.makeUnsafe()
          Effect.runSync(Scope.addFinalizerExit(scope, (exit) => Effect.sync(() => Deferred.doneUnsafe(closed, Exit.succeed(exit)))))
          Effect.runFork(writeSse(response, {}, Stream.rechunk(1)(events), frames).pipe(Scope.provide(scope)))
        })
        const port = yield* listen(server)
        const text = yield* bodyOf(port)
        expect(text).toBe("data: 1\n\ndata: 2\n\nevent: error\ndata: internal\n\n")
        const exit = yield* Deferred.await(closed)
        expect(Exit.isFailure(exit) && Cause.hasDies(exit.cause)).toBe(true)
      }).pipe(Effect.scoped), 30_000)
  }

  // A frame of megabytes (a Responses envelope repeating a huge echo, given as the pieces it is
  // joined from; a huge upstream delta, one long text) written whole held the event loop 20–25 ms
  // for 8 MB: node flattened and encoded it, and the kernel took it in one writev.
  const emoji = "\u{1F600}" // two UTF-16 units: a cut between them would be written as two U+FFFD
  // An odd start shifts every later piece by one unit, so cuts fall inside pairs unless avoided.
  const longPieces = ["x", ...Array.from({ length: 9 }, (_, i) => `${letterOf(i)}${emoji.repeat(70_000 + i)}`)]
  for (const [name, given] of [["given as pieces", true], ["one long text", false]] as const) {
    it.live(`writes a large chunk (${name}) a slice of at most 256 Ki characters a turn, no surrogate pair cut`, () =>
      Effect.gen(function*() {
        const whole = longPieces.join("")
        let handed = false
        const frames: SseFrames<number, never> = {
          chunk: () => whole,
          pieces: () => {
            const pieces = given && !handed ? longPieces : undefined
            handed = true
            return pieces
          },
          failure: () => "",
          defect: () => ""
        }
        // Each write's length and the turn of the event loop it was made in (a setImmediate counter).
        let turn = 0
        let counting = true
        const count = () => {
          turn++
          if (counting) setImmediate(count)
        }
        count()
        const writes: Array<{ readonly chars: number; readonly turn: number }> = []
        const server = createServer((_request, response) => {
          const write = response.write.bind(response) as (chunk: string) => boolean
          response.write = ((chunk: string) => {
            writes.push({ chars: chunk.length, turn })
            return write(chunk)
          }) as typeof response.write
          Effect.runFork(writeSse(response, {}, Stream.make(1), frames).pipe(Scope.provide(Scope.makeUnsafe())))
        })
        const port = yield* listen(server)
        const text = yield* bodyOf(port)
        counting = false
        expect(text.length).toBe(whole.length)
        expect(text === whole).toBe(true)
        expect(writes.length).toBeGreaterThanOrEqual(Math.ceil(whole.length / (256 * 1024)))
        expect(Math.max(...writes.map((w) => w.chars))).toBeLessThanOrEqual(256 * 1024)
        // No two slices in one turn.
        expect(new Set(writes.map((w) => w.turn)).size).toBe(writes.length)
      }).pipe(Effect.scoped), 30_000)
  }
})

const letterOf = (i: number) => String.fromCharCode(65 + (i % 26))

/** Listens on a free port for the test; closed with its scope. */
const listen = (server: Server) =>
  Effect.acquireRelease(
    Effect.callback<number>((resume) => void server.listen(0, "127.0.0.1", () => resume(Effect.succeed((server.address() as AddressInfo).port)))),
    () => Effect.sync(() => server.close())
  )

/** A GET's whole body; a cut connection gives what arrived, marked "(cut)". */
const bodyOf = (port: number) =>
  Effect.callback<string>((resume) => {
    get(`http://127.0.0.1:${port}/`, (res) => {
      let body = ""
      res.setEncoding("utf8")
      res.on("data", (part: string) => (body += part))
      res.on("end", () => resume(Effect.succeed(body)))
      res.on("close", () => resume(Effect.succeed(`${body}(cut)`)))
      res.on("error", () => {})
    }).on("error", () => resume(Effect.succeed("(cut before the head)")))
  })
