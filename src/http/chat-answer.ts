/**
 * Answers a prepared chat request in the client's dialect: meters it (429s), dispatches it through
 * the runtime (capacity queues, failover), and encodes the events as one JSON body or as SSE.
 *
 * Streams:
 * - when a slot is free, the response commits to 200 only once the first event exists, so every
 *   failure before that (a queue timeout, an upstream error after all retries) is a proper non-2xx
 *   error with the dialect's body;
 * - when the request has to wait for capacity, the headers are held while the wait is short
 *   (`GATEWAY_STREAM_HOLD_MS`): a slot granted within it answers as above, so `xsvc-model` names
 *   the model that serves. A longer wait commits: headers go out without `xsvc-model` (what will
 *   serve is not known yet; the stream's own `model` field names it) and keepalives follow every
 *   `GATEWAY_KEEPALIVE_MS`, so clients and proxies do not time out. Then a later failure (e.g. the
 *   maximum wait passing) can only be the dialect's error event;
 * - after the first event, a break ends with the dialect's error event, or — plain text only —
 *   continues on another placement, marked by an SSE comment (`switchover`).
 * Non-streaming requests wait silently (a JSON body cannot carry keepalives).
 */
import { Cause, Clock, Deferred, Effect, Fiber, Option, Pull, Result, Stream } from "effect"
import { HttpServerResponse } from "effect/http"
import type { NonEmptyReadonlyArray } from "effect/Array"
import type { BackendError } from "../backends/backend.ts"
import { Settings } from "../config/settings.ts"
import type { ChatDialect, EncodeContext, StreamEncoder, StreamFailure } from "../dialects/dialect.ts"
import { type ApiError, InvalidRequest, type PayloadTooLarge, ServiceUnavailable } from "../errors.ts"
import { type AnswerSoFar, type CanonicalEvent, collectStream, responseEvents } from "../model/events.ts"
import type { CanonicalRequest } from "../model/request.ts"
import type { QueueTimeout } from "../runtime/capacity-queue-types.ts"
import { type ModelCall, ModelCaller } from "../runtime/model-caller.ts"
import type { RequestRecord } from "../observability/request-record.ts"
import { Telemetry } from "../observability/telemetry.ts"
import { requestAttributes, startRequestSpan } from "../observability/tracing.ts"
import { type RequestContext, requireKey, withRequestId } from "./route.ts"
import { defectFrame, largeText, nodeResponseOf, type SseFrames, WRITE_SLICE_CHARS, writeSse } from "./node-sse.ts"
import { defectMessage } from "./render-error.ts"
import { sseStreamResponse } from "./sse.ts"
import { toPullPlain } from "../util/scoped.ts"
import { gatheredSlices } from "../util/slices.ts"
import { type ChunkedBody, isLarge, jsonChunksInSlices } from "../util/sliced-stringify.ts"

export type CallFailure = BackendError | QueueTimeout

/**
 * How an answer can fail: its call, or what a hook does with the answer (storing it fails: a
 * storage outage is a `ServiceUnavailable`, a body the store refuses an `InvalidRequest`, one too
 * large for it a `PayloadTooLarge`).
 */
export type AnswerFailure = CallFailure | ServiceUnavailable | InvalidRequest | PayloadTooLarge

/** How a failed call reaches the client before any byte was sent. */
export const callFailureToApiError = (error: CallFailure): ApiError => {
  if (error._tag === "QueueTimeout") {
    return new ServiceUnavailable({ status: 503, message: error.message, retryAfterSeconds: error.retryAfterSeconds })
  }
  return error.status >= 400 && error.status < 500 && error.status !== 429
    ? new InvalidRequest({ message: error.message })
    : new ServiceUnavailable({
      status: error.type === "overloaded_error" || error.status === 429 ? 503 : 502,
      message: `The model did not return a response: ${error.message}`,
      ...(error.retryAfterSeconds === undefined ? {} : { retryAfterSeconds: Math.ceil(error.retryAfterSeconds) })
    })
}

/** How a failed answer reaches the client before any byte was sent. */
const answerFailureToApiError = (error: AnswerFailure): ApiError =>
  error._tag === "ServiceUnavailable" || error._tag === "InvalidRequest" || error._tag === "PayloadTooLarge" ? error : callFailureToApiError(error)

/** How a failed call ends a stream that already started. */
export const callFailureToStreamFailure = (error: AnswerFailure): StreamFailure => {
  switch (error._tag) {
    case "QueueTimeout":
      return { status: 503, type: "api_error", message: error.message }
    case "ServiceUnavailable":
      return { status: error.status, type: "api_error", message: error.message }
    case "InvalidRequest":
      return { status: 400, type: "invalid_request_error", message: error.message }
    case "PayloadTooLarge":
      return { status: 413, type: "invalid_request_error", message: error.message }
    default:
      return { status: error.status, type: error.type, message: error.message }
  }
}

export interface AnswerHooks<Echo> {
  /**
   * Wraps the answer's events before they are encoded, streamed or not (e.g. to store the answer
   * when its last event arrives, before the client sees its end).
   */
  readonly events?: (events: Stream.Stream<CanonicalEvent, CallFailure>, context: EncodeContext<Echo>) => Stream.Stream<CanonicalEvent, AnswerFailure>
}

const utf8 = new TextEncoder()

/**
 * How a chunk of events and a failure become SSE text: the chunk's frames (after a continuation's
 * pending switch-over comment) and, for a failure, the dialect's error event — never a cut — noted
 * on the request's record. node:http answers write them as they encode (`writeSse`); other answers
 * go through `frames`. An object with methods: an open stream holds it (not closures over a scope).
 */
class EncoderFrames implements SseFrames<CanonicalEvent, AnswerFailure> {
  readonly #encoder: StreamEncoder
  readonly #notes: StreamNotes | undefined
  /** The texts the last `chunk` or `failure` answer is joined from, when they came in pieces (see `SseFrames.pieces`). */
  #pieces: ReadonlyArray<string> | undefined = undefined

  constructor(encoder: StreamEncoder, notes?: StreamNotes) {
    this.#encoder = encoder
    this.#notes = notes
  }

  chunk(chunk: NonEmptyReadonlyArray<CanonicalEvent>): string {
    let text = ""
    const notes = this.#notes
    if (notes?.switchNote !== undefined) {
      text = this.#encoder.switchover(notes.switchNote)
      notes.switchNote = undefined
    }
    // Once an event's frames come as pieces (an echo of megabytes): every text of the chunk, in order.
    let pieces: Array<string> | undefined
    for (const event of chunk) {
      const framed = this.#encoder.event(event)
      const framedPieces = this.#encoder.pieces?.()
      if (framedPieces !== undefined) {
        pieces ??= text === "" ? [] : [text]
        for (const piece of framedPieces) pieces.push(piece)
      } else pieces?.push(framed)
      text += framed
    }
    this.#pieces = pieces
    return text
  }

  pieces(): ReadonlyArray<string> | undefined {
    const pieces = this.#pieces
    this.#pieces = undefined
    return pieces
  }

  failure(error: AnswerFailure): string {
    const failure = callFailureToStreamFailure(error)
    if (this.#notes !== undefined) noteFailure(this.#notes, failure)
    const text = this.#encoder.error(failure)
    this.#pieces = this.#encoder.pieces?.()
    return text
  }

  defect(): string {
    return this.#encoder.error({ status: 500, type: "api_error", message: defectMessage(this.#notes?.record.requestId) })
  }
}

/**
 * SSE frames for a stream of events, as bytes, for the platform's stream response (the embedding
 * API's web handler, the keepalive path, the standalone simulator). The frames of one chunk go out
 * as one write. One pull stage does what `mapArray` + `catch` + `filter` + `encodeText` would do in
 * four: an open stream holds each stage's closures for as long as it lasts, and every chunk passes
 * through each. A defect (a bug, in an encoder or below) sends the dialect's error event, then
 * fails the body with its cause, so it is still logged as one.
 */
const frames = (events: Stream.Stream<CanonicalEvent, AnswerFailure>, sse: SseFrames<CanonicalEvent, AnswerFailure>): Stream.Stream<Uint8Array> =>
  Stream.transformPull(events, (pull) =>
    Effect.sync(() => {
      let ended: Cause.Cause<never> | "done" | undefined
      // A large text (an echo of megabytes) goes out a slice a pull, a turn apart, as `writeSse` writes it.
      let slices: Iterator<string> | undefined
      const endWithDefect = (cause: Cause.Cause<never>) => {
        ended = cause
        const frame = defectFrame(sse)
        return frame === undefined ? Effect.failCause(cause) : Effect.succeed([utf8.encode(frame)] as const)
      }
      const encoded = (text: string, pieces: ReadonlyArray<string> | undefined): Pull.Pull<readonly [Uint8Array], never> => {
        const large = largeText(text, pieces)
        if (large === undefined) return Effect.succeed([utf8.encode(text)] as const)
        slices = gatheredSlices(large, WRITE_SLICE_CHARS)
        return nextSlice
      }
      const nextSlice: Pull.Pull<readonly [Uint8Array], never> = Effect.suspend(() => {
        const slice = slices!.next()
        if (slice.done !== true) return Effect.succeed([utf8.encode(slice.value)] as const)
        slices = undefined
        return next
      })
      const next: Pull.Pull<readonly [Uint8Array], never> = Effect.suspend(() =>
        slices !== undefined
          ? Effect.andThen(Effect.yieldNow, nextSlice)
          : ended === "done"
          ? Cause.done()
          : ended !== undefined
          ? Effect.failCause(ended)
          : Effect.matchCauseEffect(pull, {
            onSuccess: (chunk) => {
              let text: string
              let pieces: ReadonlyArray<string> | undefined
              try {
                text = sse.chunk(chunk)
                pieces = sse.pieces?.()
              } catch (defect) {
                return endWithDefect(Cause.die(defect))
              }
              return text === "" ? next : encoded(text, pieces)
            },
            onFailure: (cause) => {
              if (Pull.isDoneCause(cause)) return Cause.done()
              const error = Cause.findError(cause)
              if (Result.isSuccess(error)) {
                ended = "done"
                const text = sse.failure(error.success as AnswerFailure)
                return encoded(text, sse.pieces?.())
              }
              return Cause.hasDies(cause) ? endWithDefect(error.failure) : Effect.failCause(error.failure)
            }
          })
      )
      return next
    }))

/** A started call's events and how they become frames. */
interface EncodedCall {
  readonly events: Stream.Stream<CanonicalEvent, AnswerFailure>
  readonly sse: SseFrames<CanonicalEvent, AnswerFailure>
}

/**
 * A started stream's answer: written by this fiber over node:http (node-sse.ts), else handed to
 * the platform as the response's body (the embedding API's web handler).
 */
const respondSse = (ctx: RequestContext, call: EncodedCall, headers: Record<string, string>) => {
  const response = nodeResponseOf(ctx.request)
  if (response === undefined) return Effect.sync(() => sseStreamResponse(frames(call.events, call.sse), headers))
  // Committed: a client that leaves from here on is logged with the status it was sent.
  ctx.record.status = 200
  return writeSse(response, withRequestId(headers, ctx.requestId), call.events, call.sse)
}

/**
 * A whole JSON answer (200). Over node:http it is written here, as a started stream is
 * (`writeSse`): the head (with the body's length) and the JSON text as it is (node encodes it),
 * with no platform response in between — no `Headers` object built from the
 * record and merged again with the request-id headers, no body encoded to bytes first, no second
 * pass that turns them back into node's. The platform then finds the response ended and writes
 * nothing. Elsewhere (the embedding API's web handler) the platform's response.
 */
const respondJson = (ctx: RequestContext, body: string | ChunkedBody, headers: Record<string, string>) => {
  const response = nodeResponseOf(ctx.request)
  if (response === undefined) {
    return typeof body === "string"
      ? HttpServerResponse.text(body, { contentType: "application/json", headers })
      : HttpServerResponse.uint8Array(Buffer.concat(body.chunks, body.bytes), { contentType: "application/json", headers })
  }
  // A client already gone gets nothing (as the platform does); the log line still says 200.
  if (!response.destroyed) {
    // Added to the caller's own record (made for this answer). The body's length, as the platform
    // sends it: an explicit head would otherwise make node chunk the body.
    headers["content-type"] = "application/json"
    headers["content-length"] = String(typeof body === "string" ? Buffer.byteLength(body) : body.bytes)
    response.writeHead(200, withRequestId(headers, ctx.requestId))
    if (typeof body === "string") response.end(body)
    else {
      for (const chunk of body.chunks) response.write(chunk)
      response.end()
    }
  }
  return HttpServerResponse.empty({ status: 200 })
}

/**
 * Runs interruptibly: Effect's HTTP server starts every request fiber uninterruptible, and only an
 * interruptible region lets a client that disconnects (while waiting for a slot, or during a
 * non-streaming answer) interrupt it, so its waiter leaves the queue and its slot comes back.
 */
export const answerChat = <Echo>(
  dialect: ChatDialect<Echo>,
  ctx: RequestContext,
  request: CanonicalRequest,
  echo: Echo,
  hooks: AnswerHooks<Echo> = {}
) => Effect.interruptible(answer(dialect as ChatDialect<unknown>, ctx, request, echo, hooks as AnswerHooks<unknown>))

/**
 * `answerChat`'s body. A generator function made once, at module load: a `function*` written
 * inside a per-request function is a new closure per request, and V8 gives each generator closure
 * its own object map in the old generation, which keeps that closure's whole scope (the request)
 * alive through every young-generation collection until the next full GC — at 200 req/s, ~5 MB
 * copied and promoted per scavenge, 20–40 ms pauses. The dialect's `Echo` is opaque here: it is
 * handed from the decoder to the encoder untouched.
 */
const answer = Effect.fnUntraced(function*(
  dialect: ChatDialect<unknown>,
  ctx: RequestContext,
  request: CanonicalRequest,
  echo: unknown,
  hooks: AnswerHooks<unknown>
) {
  const key = yield* requireKey(ctx)
  const caller = yield* ModelCaller
  ctx.record.stream = request.stream
  // The request's GenAI span, only when traces are exported; the dispatch's spans go under it.
  const span = (yield* Telemetry).tracing ? yield* startRequestSpan(ctx.record, request.model, requestAttributes(request)) : undefined
  const traced = <A, E, R>(effect: Effect.Effect<A, E, R>) => (span === undefined ? effect : Effect.withParentSpan(effect, span))
  const notes: StreamNotes = { record: ctx.record, switchNote: undefined }
  const id = dialect.newId()
  const createdAt = Math.floor((yield* Clock.currentTimeMillis) / 1000)
  const contextFor = (servedModel: string, answer?: AnswerSoFar, sent: CanonicalRequest = request): EncodeContext<unknown> =>
    ({ id, model: servedModel, createdAt, request: sent, echo, answer })

  const eventsOf = (call: { events: Stream.Stream<CanonicalEvent, CallFailure> }, context: EncodeContext<unknown>): Stream.Stream<CanonicalEvent, AnswerFailure> =>
    hooks.events === undefined ? call.events : hooks.events(call.events, context)

  if (!request.stream) {
    // The whole answer at once: the upstream is called without streaming.
    const call = yield* traced(caller.complete(request, { key, record: ctx.record })).pipe(
      Effect.catchTags({ BackendError: (e) => Effect.fail(callFailureToApiError(e)), QueueTimeout: (e) => Effect.fail(callFailureToApiError(e)) })
    )
    const context = contextFor(call.servedModel)
    // A hook that watches events (storing a response) sees the answer's events at least.
    const response = hooks.events === undefined
      ? call.response
      : yield* collectStream(hooks.events(Stream.fromIterable(responseEvents(call.response)), context)).pipe(Effect.mapError(answerFailureToApiError))
    const encoded = dialect.encodeResponse(response, context)
    // A large answer (a 30 MiB one from the upstream) in slices, as UTF-8 chunks: `JSON.stringify`
    // of it and node's encoding of that string held the event loop ~400 ms together on a slow VM.
    const body = isLarge(encoded) ? yield* jsonChunksInSlices(encoded) : JSON.stringify(encoded)
    return respondJson(ctx, body, { "xsvc-model": call.servedModel, ...call.headers })
  }

  const settings = yield* Settings
  // What comes first: the call starting (a slot was free, or granted) or the queue's notice that
  // the request waits. One Deferred both complete (the first wins), not a race of two fibers.
  const first = Deferred.makeUnsafe<"started" | "queued">()
  // Traced like `start`: on Redis the dispatch begins inside `prepare` (ModelCaller.prepare).
  const prepared = yield* traced(caller.prepare(request, {
    key,
    record: ctx.record,
    onQueued: signalQueued(first),
    onContinue: noteSwitchOf(notes)
  }))

  // One started call's events and frames; the dialect's error event ends a failure.
  // The context names the request as sent (which the call holds anyway), so an open stream does
  // not keep the request as decoded beside it.
  const encodeCall = (call: ModelCall): EncodedCall => {
    const context = contextFor(call.servedModel, call.answer, prepared.request)
    return { events: eventsOf(call, context), sse: new EncoderFrames(dialect.streamEncoder(context), notes) }
  }

  // Started at once, not on the scheduler's next turn (a setImmediate hop before the dispatch).
  const starting = yield* Effect.forkScoped(traced(prepared.start), { startImmediately: true })
  starting.addObserver(() => void Deferred.doneUnsafe(first, Effect.succeed("started")))
  const answerStarted = Fiber.join(starting).pipe(
    Effect.mapError(callFailureToApiError),
    Effect.flatMap((call) => respondSse(ctx, encodeCall(call), { "xsvc-model": call.servedModel, ...call.headers() }))
  )
  if ((yield* Deferred.await(first)) === "started") return yield* answerStarted
  // Waiting for capacity: a short wait keeps the headers, so `xsvc-model` can name what serves.
  const grantedSoon = settings.streamHoldMs > 0
    ? yield* Fiber.await(starting).pipe(Effect.timeoutOption(`${settings.streamHoldMs} millis`))
    : Option.none()
  if (Option.isSome(grantedSoon)) return yield* answerStarted

  // A long wait: commit now (no `xsvc-model`: what serves is not known yet), keep the
  // connection alive until a slot is granted.
  const waiting = dialect.streamEncoder(contextFor(request.model))
  const keepalives = Stream.tick(`${settings.keepaliveMs} millis`).pipe(
    Stream.map(() => utf8.encode(waiting.keepalive())),
    Stream.interruptWhen(Fiber.await(starting))
  )
  const rest = Stream.unwrap(
    Fiber.join(starting).pipe(
      Effect.map((call) => {
        const encoded = encodeCall(call)
        return frames(encoded.events, encoded.sse)
      }),
      Effect.catch((error: CallFailure) => {
        const failure = callFailureToStreamFailure(error)
        noteFailure(notes, failure)
        return Effect.succeed(Stream.succeed(utf8.encode(waiting.error(failure))))
      })
    )
  )
  return sseStreamResponse(Stream.concat(keepalives, rest), prepared.headers())
})

/**
 * What a stream's frames and the dispatch's hooks keep of the request, apart from `answer`'s own
 * variables. V8 keeps every variable a closure made in `answer` uses in one shared context, so a
 * closure made there and held by the stream (the dispatch's hooks, the frames' switch-over and
 * failure notes) kept all of them — the prepared call, its fiber, the hooks — for as long as the
 * stream stayed open. These closures are made here, over this object only.
 */
interface StreamNotes {
  readonly record: RequestRecord
  /** A continuation's switch-over comment, sent just before its first event. */
  switchNote: string | undefined
}

/** A stream that already answered 200 and ends with the dialect's error event: logged as such. */
const noteFailure = (notes: StreamNotes, failure: StreamFailure) => {
  notes.record.error = { type: failure.type, message: failure.message }
}

const noteSwitchOf = (notes: StreamNotes) => (to: { readonly modelId: string }) =>
  Effect.sync(() => {
    notes.switchNote = `continuing on ${to.modelId} from the text already sent`
  })

const signalQueued = (first: Deferred.Deferred<"started" | "queued">) => Effect.sync(() => void Deferred.doneUnsafe(first, Effect.succeed("queued")))

/**
 * Waits for the first chunk of a stream and returns a stream that replays it and continues, so the
 * caller can still choose the HTTP status. Runs in the request's scope.
 */
const startStream = <A, E>(stream: Stream.Stream<A, E>) =>
  Effect.flatMap(toPullPlain(stream), (pull) =>
    pull.pipe(
      Effect.map(Option.some),
      Pull.catchDone(() => Effect.succeed(Option.none<ReadonlyArray<A>>())),
      Effect.map((first) => {
        const rest = Stream.fromPull(Effect.succeed(pull))
        return Option.isSome(first) ? Stream.concat(Stream.fromArray(first.value), rest) : rest
      })
    ))

/**
 * Encodes a backend's events with no runtime in between (the standalone simulator upstream): one
 * JSON body, or SSE that commits to 200 at the first event. (No `function*` in these two: one made
 * per call keeps the request alive through young-generation collections, as `answer` says.)
 */
export const encodeDirect = <Echo>(dialect: ChatDialect<Echo>, context: EncodeContext<Echo>, events: Stream.Stream<CanonicalEvent, BackendError>) =>
  !context.request.stream
    ? Effect.map(
      collectStream(events).pipe(Effect.mapError(callFailureToApiError)),
      (response) => HttpServerResponse.text(JSON.stringify(dialect.encodeResponse(response, context)), { contentType: "application/json" })
    )
    : Effect.map(
      startStream(events).pipe(Effect.mapError(callFailureToApiError)),
      (started) => sseStreamResponse(frames(started, new EncoderFrames(dialect.streamEncoder(context))), {})
    )
