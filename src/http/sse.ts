/**
 * Server-Sent Events framing shared by the dialects. Both SDKs split events on blank lines, treat
 * `:` lines as comments, and choke on empty `data:` — so every frame has JSON data, and keepalives
 * are comments.
 */
import { Context, Fiber, Scope, type Stream } from "effect"
import { HttpEffect, HttpServerResponse } from "effect/http"
import { onExitPlain } from "../util/scoped.ts"

/** `event: <name>` + `data: <json>` (Messages and Responses dialects). */
export const namedFrame = (event: string, data: unknown) => `event: ${event}\ndata: ${JSON.stringify(data)}\n\n`

/** `data: <json>` only (Chat Completions and legacy completions: never an `event:` line). */
export const dataFrame = (data: unknown) => `data: ${JSON.stringify(data)}\n\n`

/** A comment line, ignored by every SSE parser. */
export const commentFrame = (text: string) => `: ${text.replace(/[\r\n]+/g, " ")}\n\n`

export const SSE_HEADERS = {
  "cache-control": "no-cache",
  "x-accel-buffering": "no"
} as const

/** Keepalives and switch-over markers as comments: what the OpenAI-shaped dialects send. */
export const commentSignals = {
  keepalive: () => commentFrame("keepalive"),
  switchover: (note: string) => commentFrame(note)
}

/**
 * SSE frames as the response body; a keepalive is a frame too. The request's scope (a call's slot
 * and metering hold, a run's signal subscription) closes when the body ends, as
 * `HttpEffect.scopeTransferToStream` does — but through `onExitPlain`, without the generator
 * Effect's `Stream.onExit` makes per stream. Called synchronously in the request's fiber.
 */
export const sseStreamResponse = (body: Stream.Stream<Uint8Array>, headers: Record<string, string>) => {
  // The request scope Effect's HTTP server made (Scope.makeUnsafe): closeable, as its own transfer assumes.
  const scope = Context.getUnsafe(Fiber.getCurrent()!.context, Scope.Scope) as Scope.Closeable
  HttpEffect.scopeDisableClose(scope)
  return HttpServerResponse.stream(onExitPlain(body, (exit) => Scope.close(scope, exit)), {
    contentType: "text/event-stream",
    headers: { ...SSE_HEADERS, ...headers }
  })
}
