/**
 * Worker thread entry: receives an upload body in chunks, reads its envelope, parses the content
 * and sends the pieces to insert, a few at a time (the main thread acknowledges each one it has
 * written, so a slow database holds the worker back instead of piling up messages). The whole
 * CPU cost of an upload runs here, off the event loop. Protocol: `content-parser.ts`.
 *
 * A large content (`WORKER_WRITES_MIN_BYTES`) is written from here instead, on connections of the
 * worker's own (`row-writer.ts`): its pieces never reach the event loop. The writer (the SQL client,
 * ~0.2 s of module loading) is loaded and connected as soon as the body passes that size, while
 * the rest of it still arrives. After a clean upload the worker forgets it (`reset`) and is kept
 * for the next one, writer loaded and connections open (`ParseWorkerPool`).
 */
import { parentPort, workerData } from "node:worker_threads"
import { concatChunks, type Envelope, isEnvelopeError, readEnvelope } from "./envelope.ts"
import { ContentParseError, parseContent, parseFailure } from "./parse-content.ts"
import { type Piece, piecesOf, transferables } from "./row-batches.ts"
import type { RowWriter } from "./row-writer.ts"
import { type FromParseWorker, type ParseWorkerData, type ToParseWorker, WORKER_WRITES_MIN_BYTES } from "./worker-protocol.ts"

/** Pieces sent and not yet acknowledged. */
const WINDOW = 2

const target = (workerData as ParseWorkerData | undefined)?.target
const writesFromBytes = target?.minBytes ?? WORKER_WRITES_MIN_BYTES
let writer: Promise<RowWriter> | undefined
const openWriter = () => (writer ??= import("./row-writer.ts").then((m) => m.openRowWriter(target!)))
let received = 0
let stopping = new AbortController()
let writing = false

const port = parentPort!
const send = (message: FromParseWorker, transfer?: ReadonlyArray<ArrayBuffer>) => port.postMessage(message, transfer as Array<ArrayBuffer>)

let chunks: Array<Uint8Array> = []
let envelope: Envelope | undefined
let pieces: Generator<Piece> | undefined
let inFlight = 0

const pump = () => {
  while (pieces !== undefined && inFlight < WINDOW) {
    const next = pieces.next()
    if (next.done) {
      pieces = undefined
      send({ type: "done" })
      return
    }
    inFlight++
    const piece = next.value
    send({ type: "piece", piece }, transferables(piece))
  }
}

port.on("message", (message: ToParseWorker) => {
  switch (message.type) {
    case "chunk":
      chunks.push(message.bytes)
      received += message.bytes.length
      if (target !== undefined && received >= writesFromBytes) void openWriter().catch(() => {}) // reported at "store"
      return
    case "end": {
      const read = readEnvelope(concatChunks(chunks))
      chunks = []
      if (isEnvelopeError(read)) return send({ type: "invalid", param: read.param, message: read.message })
      envelope = read
      return send({ type: "envelope", fields: read.fields, contentField: read.contentField, sizeBytes: read.bytes.length, sha256: read.sha256 })
    }
    case "parse": {
      const e = envelope!
      try {
        const parsed = parseContent(e.text, e.bytes.length, message.hints, e.value)
        const writes = target !== undefined && e.bytes.length >= writesFromBytes ? "worker" : "main"
        send({ type: "parsed", format: parsed.format, shape: parsed.shape, writes })
        pieces = piecesOf(parsed, e.bytes, message.batchBytes)
        if (writes === "main") pump()
      } catch (error) {
        if (!(error instanceof ContentParseError)) throw error
        send(parseFailure(error, e.contentField))
      }
      return
    }
    case "ack":
      inFlight--
      pump()
      return
    case "stop":
      stopping.abort()
      return
    case "store": {
      const all = pieces!
      pieces = undefined
      writing = true
      openWriter()
        .then((w) => w.write(message.contentId, all, stopping.signal))
        .then(
          (failure) => failure === undefined ? { type: "stored" } as const : { type: "store-failed", ...failure } as const,
          (error) => ({ type: "store-failed", code: undefined, message: error instanceof Error ? error.message : String(error) }) as const
        )
        .then((reply) => {
          writing = false
          send(reply)
        })
      return
    }
    case "reset":
      // A write still running cannot be forgotten: no answer, and the upload terminates the worker.
      if (writing) return
      chunks = []
      envelope = undefined
      pieces = undefined
      inFlight = 0
      received = 0
      stopping = new AbortController()
      return send({ type: "reset-done" })
  }
})
