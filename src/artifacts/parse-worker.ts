/**
 * Worker thread entry: receives an upload body in chunks, reads its envelope, parses the content
 * and sends the pieces to insert, a few at a time (the main thread acknowledges each one it has
 * written, so a slow database holds the worker back instead of piling up messages). The whole
 * CPU cost of an upload runs here, off the event loop. Protocol: `content-parser.ts`.
 */
import { parentPort } from "node:worker_threads"
import { concatChunks, type Envelope, isEnvelopeError, readEnvelope } from "./envelope.ts"
import { ContentParseError, parseContent, parseFailure } from "./parse-content.ts"
import { type Piece, piecesOf, transferables } from "./row-batches.ts"
import type { FromParseWorker, ToParseWorker } from "./worker-protocol.ts"

/** Pieces sent and not yet acknowledged. */
const WINDOW = 2

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
        send({ type: "parsed", format: parsed.format, shape: parsed.shape })
        pieces = piecesOf(parsed, e.bytes, message.batchBytes)
        pump()
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
  }
})
