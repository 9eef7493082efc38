/**
 * A started SSE answer written straight to node:http's response by the request's own fiber.
 *
 * Returning `HttpServerResponse.stream` hands the body to the platform, which runs it as a stream
 * of its own (an `orDie` stage and a `runForEachArray` loop) after our stages that close the
 * request's scope and finish its log line when the body ends: four stages every chunk passes
 * through and an open stream holds, and a fiber hop between the handler's answer and the first
 * write. Here the handler writes the head and every frame itself and returns once the stream has
 * ended, so the request's scope closes and its log line is written when the handler ends, as for
 * any other answer. The platform sees the response already ended and writes nothing.
 *
 * Only where the request is node:http's (the gateway's own server); the embedding API's web
 * handler has no Node response and keeps the platform's stream (see `sseResponse`).
 */
import type { ServerResponse } from "node:http"
import { Cause, Effect, Pull, Result, Stream } from "effect"
import type { NonEmptyReadonlyArray } from "effect/Array"
import type { HttpServerRequest } from "effect/http"
import { HttpServerResponse } from "effect/http"
import { toPullPlain } from "../util/scoped.ts"
import { SSE_HEADERS } from "./sse.ts"

/** node:http's response under an Effect request, when there is one. */
export const nodeResponseOf = (request: HttpServerRequest.HttpServerRequest): ServerResponse | undefined => {
  if (!("resolvedResponse" in request)) return undefined
  const response = (request as { readonly resolvedResponse: unknown }).resolvedResponse as Partial<ServerResponse> | undefined
  return response !== undefined && typeof response.writeHead === "function" && response.headersSent === false ? response as ServerResponse : undefined
}

/** Whether the handler already wrote the answer to node:http itself (`writeSse`, `respondJson`). */
export const answeredDirectly = (request: HttpServerRequest.HttpServerRequest): boolean =>
  "resolvedResponse" in request && (request as { readonly resolvedResponse?: { readonly headersSent?: unknown } }).resolvedResponse?.headersSent === true

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
  /** The frame that ends a stream that failed (the dialect's error event): never a silent cut. */
  readonly failure: (error: E) => string
}

/**
 * Writes the head (200, `text/event-stream`) and then each chunk of `events` as its frames (one
 * write per chunk), honouring backpressure, and ends the response; a failure ends it with its
 * frame. Encoding happens here, in the loop that writes, rather than in a stream stage of its own
 * in front of it: one Effect step less for every chunk. Needs the request's scope (the events are
 * pulled in it).
 */
export const writeSse = <A, E>(response: ServerResponse, headers: Record<string, string>, events: Stream.Stream<A, E>, frames: SseFrames<A, E>) =>
  Effect.flatMap(toPullPlain(events), (pull) => {
    response.writeHead(200, { ...SSE_HEADERS, ...headers, "content-type": "text/event-stream" })
    flattenHead(response)
    const pump: Effect.Effect<void> = Effect.matchCauseEffect(pull, {
      onSuccess: (chunk) => {
        const text = frames.chunk(chunk)
        return text === "" || response.write(text) ? pump : Effect.andThen(writable(response), pump)
      },
      onFailure: (cause) => {
        if (Pull.isDoneCause(cause)) return Effect.void
        const error = Cause.findError(cause)
        // Not a failure of the answer (a defect, an interruption): the fiber's own business.
        if (Result.isFailure(error)) return Effect.failCause(error.failure)
        response.write(frames.failure(error.success as E))
        return Effect.void
      }
    })
    return pump.pipe(
      Effect.andThen(Effect.sync(() => response.end())),
      // Already written: the platform finds the response ended and leaves it alone.
      Effect.as(HttpServerResponse.empty({ status: 200 }))
    )
  })
