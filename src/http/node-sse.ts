/**
 * A started SSE answer written straight to node:http's response.
 *
 * Returning `HttpServerResponse.stream` hands the body to the platform, which runs it as a stream
 * of its own (an `orDie` stage and a `runForEachArray` loop) after our stages that close the
 * request's scope and finish its log line when the body ends: four stages every chunk passes
 * through and an open stream holds, and a fiber hop between the handler's answer and the first
 * write. Here the handler writes the head, then hands the frames to a writer fiber of its own and
 * returns: the platform is told the answer is written (it writes nothing), the request's scope
 * stays open until the writer ends and closes with its exit, and the log line is written then
 * (app.ts). An open stream so holds only the writer's few frames, not the whole request handler's
 * fiber stack (every generator and continuation between the server and here): 5 KiB less per open
 * stream (bench/stream-memory.ts).
 *
 * Only where the request is node:http's (the gateway's own server); the embedding API's web
 * handler has no Node response and keeps the platform's stream (see `sseResponse`).
 */
import type { ServerResponse } from "node:http"
import { Cause, Context, Effect, type Fiber, Pull, Result, Scope, type Stream } from "effect"
import type { NonEmptyReadonlyArray } from "effect/Array"
import { HttpEffect, HttpServerRequest, HttpServerResponse } from "effect/http"
import { toPullPlain } from "../util/scoped.ts"
import { gatheredSlices } from "../util/slices.ts"
import { OpenStreams } from "./open-streams.ts"
import { SSE_HEADERS } from "./sse.ts"

/**
 * node:http's response under an Effect request (platform-node keeps it as `resolvedResponse`), when
 * there is one: the one place this adapter detail is read.
 */
const resolvedResponseOf = (request: HttpServerRequest.HttpServerRequest): Partial<ServerResponse> | undefined =>
  "resolvedResponse" in request ? (request as { readonly resolvedResponse?: Partial<ServerResponse> }).resolvedResponse : undefined

/** node:http's response under an Effect request, when there is one and nothing was written to it yet. */
export const nodeResponseOf = (request: HttpServerRequest.HttpServerRequest): ServerResponse | undefined => {
  const response = resolvedResponseOf(request)
  return response !== undefined && typeof response.writeHead === "function" && response.headersSent === false ? response as ServerResponse : undefined
}

/** Whether the handler already wrote the answer to node:http itself (`writeSse`, `respondJson`). */
export const answeredDirectly = (request: HttpServerRequest.HttpServerRequest): boolean => resolvedResponseOf(request)?.headersSent === true

/**
 * Whether the answer goes on after the handler: a stream whose writer (`writeSse`) has not ended
 * the response. (A writer that already stopped because the client left has closed the request's
 * scope: a finalizer added to it then runs at once.)
 */
export const answerContinues = (request: HttpServerRequest.HttpServerRequest): boolean => {
  const response = resolvedResponseOf(request)
  return response?.headersSent === true && response.writableEnded === false
}

/**
 * Tells the platform the answer is written: its node:http adapter writes nothing for a request
 * whose response another protocol took over (`upgradedResponse`, as a WebSocket upgrade sets).
 * Without it, a handler that returns while its writer goes on would have the response ended
 * under the writer.
 */
const WRITTEN = HttpServerResponse.empty({ status: 200 })
const markWritten = (request: HttpServerRequest.HttpServerRequest) => {
  const state = request as unknown as { upgradeState?: { response: HttpServerResponse.HttpServerResponse } }
  state.upgradeState = { response: WRITTEN }
}

/** Resumes once the response can take more (or is gone: the client's close interrupts the fiber). */
const writable = (response: ServerResponse): Effect.Effect<void> =>
  Effect.callback<void>((resume) => {
    const done = () => {
      response.off("drain", done)
      response.off("close", done)
      resume(Effect.void)
    }
    response.on("drain", done)
    response.on("close", done)
    return Effect.sync(() => {
      response.off("drain", done)
      response.off("close", done)
    })
  })

/**
 * node:http keeps the head it built (`_header`) until the response ends, as V8 built it: a tree of
 * cons-strings, one node per `name: value\r\n` piece (~64 nodes, ~2 KiB for this head), which a
 * stream holds for minutes. Reading it as a number makes V8 flatten it in place into one string
 * (~0.4 KiB); the tree becomes garbage.
 */
const flattenHead = (response: ServerResponse) => {
  const head = (response as unknown as { readonly _header?: unknown })._header
  if (typeof head === "string") flattened.last = Number(head)
}
/** Where `flattenHead` puts the number, so no compiler drops the conversion as unused. */
const flattened = { last: 0 }

/** How a stream's chunks and its failure become SSE text. */
export interface SseFrames<A, E> {
  /** The frames for one chunk (what one upstream read completed), or "" for none. */
  readonly chunk: (chunk: NonEmptyReadonlyArray<A>) => string
  /**
   * The texts the last `chunk` or `failure` answer was joined from, when it holds a large piece
   * put in without a copy (a Responses echo of megabytes), else undefined; asked right after it.
   */
  readonly pieces?: () => ReadonlyArray<string> | undefined
  /** The frame that ends a stream that failed (the dialect's error event): never a silent cut. */
  readonly failure: (error: E) => string
  /** The frame that ends a stream a defect (a bug) broke: the dialect's error event for an internal error. */
  readonly defect: () => string
}

/**
 * Writes the head (200, `text/event-stream`), then hands the rest to a writer fiber and returns:
 * the writer writes each chunk of `events` as its frames (one write per chunk), honouring
 * backpressure, and ends the response; a failure ends it with its frame. Encoding happens in the
 * loop that writes, rather than in a stream stage of its own in front of it: one Effect step less
 * for every chunk.
 *
 * The writer runs in the `OpenStreams` scope, with the request's services (no copy: the fiber's
 * own context). The request's scope — the events are pulled in it — is closed by the writer, with
 * its exit, instead of when the handler ends. A client that leaves interrupts the writer (as the
 * platform interrupts a handler), which closes that scope as interrupted.
 */
export const writeSse = <A, E>(response: ServerResponse, headers: Record<string, string>, events: Stream.Stream<A, E>, frames: SseFrames<A, E>) =>
  Effect.flatMap(toPullPlain(events), (pull) =>
    Effect.withFiber((fiber) => {
      response.writeHead(200, { ...SSE_HEADERS, ...headers, "content-type": "text/event-stream" })
      flattenHead(response)
      return startWriter(fiber, response, pull, frames)
    }))

/**
 * The writer fiber and its listeners, made outside `writeSse`: the closures an open stream keeps
 * (the writer's exit, the socket's close listener) would otherwise keep `writeSse`'s contexts and
 * with them the head's headers (~0.3 KiB an open stream).
 */
const startWriter = <A, E>(fiber: Fiber.Fiber<unknown, unknown>, response: ServerResponse, pull: Pull.Pull<NonEmptyReadonlyArray<A>, E>, frames: SseFrames<A, E>) => {
  const scope = Context.getUnsafe(fiber.context, Scope.Scope) as Scope.Closeable
  HttpEffect.scopeDisableClose(scope)
  const request = Context.getOption(fiber.context, HttpServerRequest.HttpServerRequest)
  if (request._tag === "Some") markWritten(request.value)
  const writer = writeFrames(response, pull, frames).pipe(Effect.onExit((exit) => {
    // Not ended: interrupted (the client left, or the server stopped) or a defect — cut, as the
    // platform cuts a handler's failed answer, rather than left open.
    if (!response.writableEnded) response.destroy()
    return Scope.close(scope, exit)
  }))
  // Started at once, not on the scheduler's next turn: its exit handler is in place before
  // anything can interrupt it (a fiber interrupted before it starts runs none of its effect),
  // and the first frame goes out without a hop.
  const openStreams = Context.get(fiber.context, OpenStreams)
  const options = { startImmediately: true } as const
  return Effect.map(openStreams === undefined ? Effect.forkDetach(writer, options) : Effect.forkIn(writer, openStreams, options), (writing) => {
    response.on("close", () => {
      if (!response.writableEnded) writing.interruptUnsafe()
    })
    // Gone before the listener was there: its close has been emitted already.
    if (response.destroyed && !response.writableEnded) writing.interruptUnsafe()
    return WRITTEN
  })
}

/**
 * The writer's loop, made outside `writeSse`: an open stream keeps only what this closes over (not
 * the head's headers).
 */
const writeFrames = <A, E>(response: ServerResponse, pull: Pull.Pull<NonEmptyReadonlyArray<A>, E>, frames: SseFrames<A, E>): Effect.Effect<void, never> => {
  const pump: Effect.Effect<void> = Effect.matchCauseEffect(pull, {
    onSuccess: (chunk) => {
      let text: string
      let pieces: ReadonlyArray<string> | undefined
      try {
        text = frames.chunk(chunk)
        pieces = frames.pieces?.()
      } catch (defect) {
        return endWithDefect(response, frames, Cause.die(defect))
      }
      const large = largeText(text, pieces)
      if (large !== undefined) return Effect.andThen(writeInSlices(response, large), pump)
      return text === "" || response.write(text) ? pump : Effect.andThen(writable(response), pump)
    },
    onFailure: (cause) => {
      if (Pull.isDoneCause(cause)) return Effect.sync(() => response.end())
      const error = Cause.findError(cause)
      if (Result.isSuccess(error)) {
        const text = frames.failure(error.success as E)
        const large = largeText(text, frames.pieces?.())
        if (large !== undefined) return Effect.andThen(writeInSlices(response, large), Effect.sync(() => response.end()))
        response.end(text)
        return Effect.void
      }
      // Not a failure of the answer: a defect, or an interruption (the client is gone: nothing to write).
      return Cause.hasDies(cause) ? endWithDefect(response, frames, error.failure) : Effect.failCause(error.failure)
    }
  })
  return pump
}

/**
 * The most characters written in one turn of the event loop. A frame of megabytes (a Responses
 * envelope repeating a huge echo, a huge upstream delta) written whole held the loop 20–25 ms for
 * 8 MB: node flattened it to count its bytes, encoded it, and the kernel took it in one writev.
 */
export const WRITE_SLICE_CHARS = 256 * 1024

/** The texts to write a slice a turn (`pieces`, or the text alone when it is long), or undefined for a text written at once. */
export const largeText = (text: string, pieces: ReadonlyArray<string> | undefined): ReadonlyArray<string> | undefined =>
  pieces ?? (text.length > WRITE_SLICE_CHARS ? [text] : undefined)

/**
 * Writes `pieces` (which join to the frames' text) a slice of at most WRITE_SLICE_CHARS a turn, never
 * cutting a surrogate pair (each half would be written as U+FFFD), waiting for the socket to drain
 * when it is full, and a turn of the event loop after each either way. The pieces are never joined
 * into one string: a rope of them would be flattened whole.
 */
const writeInSlices = (response: ServerResponse, pieces: ReadonlyArray<string>): Effect.Effect<void> =>
  Effect.suspend(() => {
    const slices = gatheredSlices(pieces, WRITE_SLICE_CHARS)
    const next: Effect.Effect<void> = Effect.suspend(() => {
      const slice = slices.next()
      if (slice.done === true || response.destroyed) return Effect.void
      // A turn of its own even when the socket took it at once: its drain then comes on the next tick.
      return Effect.andThen(response.write(slice.value) ? Effect.yieldNow : Effect.andThen(writable(response), Effect.yieldNow), next)
    })
    return next
  })

/**
 * A defect (a bug, in an encoder or below) still ends the stream with the dialect's error event;
 * the writer's exit carries the cause, so it is logged as a defect.
 */
const endWithDefect = <A, E>(response: ServerResponse, frames: SseFrames<A, E>, cause: Cause.Cause<never>): Effect.Effect<never> => {
  if (!response.destroyed && !response.writableEnded) {
    const frame = defectFrame(frames)
    if (frame !== undefined) response.end(frame)
  }
  return Effect.failCause(cause)
}

/**
 * The frame that ends a stream a defect broke, or undefined when the encoder is broken past making
 * even its error event: the stream is then cut, as the last resort.
 */
export const defectFrame = <A, E>(frames: SseFrames<A, E>): string | undefined => {
  try {
    return frames.defect()
  } catch {
    return undefined
  }
}
