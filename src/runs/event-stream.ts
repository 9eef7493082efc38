/**
 * A run's log as SSE frames: an opening comment (so the response commits at once), then `id:
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
import { jsonTextPiecesInSlices } from "../util/sliced-stringify.ts"
import { RunLog } from "./run-log.ts"
import type { LogEvent } from "./run-record.ts"
import { RunsRepo } from "./runs-repo.ts"

const PAGE = 500

/**
 * An event's frame, as the texts to send in order: its JSON in pieces made in slices when large (a
 * tool result may be 16 MiB; `JSON.stringify` of it, then its UTF-8 encoding, held the event loop
 * for hundreds of milliseconds on a slow VM).
 */
const eventFrame = (event: LogEvent): Effect.Effect<ReadonlyArray<string>> =>
  Effect.map(jsonTextPiecesInSlices(event), (pieces) => [`id: ${event.seq}\nevent: ${event.type}\ndata: `, ...pieces, "\n\n"])
const DONE_FRAME = "event: done\ndata: {}\n\n"
/** The comment that opens every stream (SSE parsers ignore comments). */
const OPEN_FRAME = commentFrame("stream open")

export const runEventFrames = (runId: string, after: number, heartbeatMs: number) =>
  Stream.callback<string, never, RunSignals | RunLog | RunsRepo>((queue) =>
    Effect.gen(function*() {
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
        const events = yield* log.read(runId, cursor, PAGE)
        for (const event of events) {
          yield* Queue.offerAll(queue, yield* eventFrame(event))
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
          yield* Queue.offer(queue, commentFrame("heartbeat"))
          lastSent = now
        }
      }
    }).pipe(
      // A storage failure mid-stream closes the connection; the client resumes with Last-Event-ID.
      Effect.catchCause((cause) =>
        Cause.hasInterruptsOnly(cause)
          ? Effect.interrupt
          : Effect.logWarning(`event stream of ${runId} ended`, cause).pipe(Effect.andThen(Queue.end(queue)))
      )
    ), { bufferSize: 64 })
