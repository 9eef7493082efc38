/**
 * A run's log as SSE frames (bytes): an opening comment (so the response commits at once), then `id:
 * <seq>`, `event: <type>`, `data: <event JSON with seq>`, from `after` on, then live; a final
 * `event: done` with `{}` once the run is finished and every event was sent. It subscribes to the
 * run's wake-up signal before the first read (so no append between the read and the wait is
 * missed), reads `seq > cursor` from SQL after each signal — and, where signals can be lost
 * (Redis), every `recheckMs` — and sends a heartbeat comment when nothing was sent for `heartbeatMs`. Every frame comes
 * from SQL, so instances can write and read the same run.
 */
import { Cause, Clock, Effect, Queue, Stream } from "effect"
import { recheckMs, RunSignals } from "../coordination/run-signals.ts"
import { commentFrame } from "../http/sse.ts"
import { type EventText, RunLog } from "./run-log.ts"
import { RunsRepo } from "./runs-repo.ts"

const PAGE = 500
/** A large event's text goes out in views of this size. */
const PIECE_BYTES = 64 * 1024
/**
 * Pieces a pull takes at most: the server joins what one pull gives into one buffer before it
 * writes, so a pull stays within 1 MiB (at 64, 4 MiB were joined in one turn).
 */
const PIECES_PER_PULL = 16

const utf8 = new TextEncoder()
const text = (frame: string) => utf8.encode(frame)

/**
 * An event's frame: `id`, `event`, and as `data` the JSON text it was stored in with its `seq`
 * added before the closing brace (`{…,"seq":N}`). The stored bytes go out as they are, never
 * decoded, parsed or serialized again: a tool result may be 16 MiB, and its JSON made again, then
 * encoded, held the event loop for tens to hundreds of milliseconds.
 */
const eventFrame = (event: EventText): ReadonlyArray<Uint8Array> => {
  const pieces: Array<Uint8Array> = [text(`id: ${event.seq}\nevent: ${event.type}\ndata: `)]
  // All of the text but its last byte (the closing brace).
  const last = event.text.length - 1
  event.text.forEach((piece, i) => {
    const fields = i === last ? piece.subarray(0, piece.byteLength - 1) : piece
    for (let at = 0; at < fields.byteLength; at += PIECE_BYTES) pieces.push(fields.subarray(at, at + PIECE_BYTES))
  })
  pieces.push(text(`,"seq":${event.seq}}\n\n`))
  return pieces
}
const DONE_FRAME = text("event: done\ndata: {}\n\n")
/** The comment that opens every stream (SSE parsers ignore comments). */
const OPEN_FRAME = text(commentFrame("stream open"))

/**
 * The run's frames into `queue` until it is finished (made once: a generator written in
 * `runEventFrames` would be a closure per stream, kept through young-generation collections).
 */
const feedRunEvents = Effect.fnUntraced(function*(queue: Queue.Queue<Uint8Array, Cause.Done>, runId: string, after: number, heartbeatMs: number) {
  const signals = yield* RunSignals
  const log = yield* RunLog
  const repo = yield* RunsRepo
  const subscription = yield* signals.subscribe(runId)
  const recheck = recheckMs(signals)
  let cursor = after
  // A first frame at once: the response (status and headers) is committed now, not with the
  // first event or heartbeat, which may be many seconds away.
  yield* Queue.offer(queue, OPEN_FRAME)
  let lastSent = yield* Clock.currentTimeMillis
  while (true) {
    const events = yield* log.texts(runId, cursor, PAGE)
    for (const event of events) {
      yield* Queue.offerAll(queue, eventFrame(event))
      cursor = event.seq
    }
    if (events.length > 0) lastSent = yield* Clock.currentTimeMillis
    if (events.length === PAGE) continue
    const row = yield* repo.state(runId)
    if (row === undefined || (row.finished_at !== null && cursor >= Number(row.last_seq))) {
      yield* Queue.offer(queue, DONE_FRAME)
      return yield* Queue.end(queue)
    }
    // A page cut short by its byte budget (large events), or events appended meanwhile: read on.
    if (events.length > 0 && cursor < Number(row.last_seq)) continue
    // Until the next heartbeat is due (or the next re-read, where signals can be lost).
    const untilHeartbeat = Math.max(1, lastSent + heartbeatMs - (yield* Clock.currentTimeMillis))
    yield* subscription.wait(recheck === undefined ? untilHeartbeat : Math.min(recheck, untilHeartbeat))
    const now = yield* Clock.currentTimeMillis
    if (now - lastSent >= heartbeatMs) {
      yield* Queue.offer(queue, text(commentFrame("heartbeat")))
      lastSent = now
    }
  }
})

export const runEventFrames = (runId: string, after: number, heartbeatMs: number) =>
  Stream.callback<Uint8Array, never, RunSignals | RunLog | RunsRepo>((queue) =>
    feedRunEvents(queue, runId, after, heartbeatMs).pipe(
      // A storage failure mid-stream closes the connection; the client resumes with Last-Event-ID.
      Effect.catchCause((cause) =>
        Cause.hasInterruptsOnly(cause)
          ? Effect.interrupt
          : Effect.logWarning(`event stream of ${runId} ended`, cause).pipe(Effect.andThen(Queue.end(queue)))
      )
    ), { bufferSize: PIECES_PER_PULL })
