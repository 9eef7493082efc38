/**
 * The Anthropic backend: serves a placement from an upstream that speaks the Messages API.
 *
 * Every call streams upstream (`stream: true`), also for clients that asked for one JSON body: the
 * runtime always consumes a canonical event stream, and streaming lets the first byte decide
 * failover early. Calls go through undici `Pool`s (one per origin, created on first use, kept
 * alive between calls), never `fetch`, which measured several times slower as a proxy. A client
 * that goes away aborts the upstream request.
 *
 * The pure halves live beside this file: `wire-request.ts` (canonical → Messages request),
 * `sse-parser.ts` + `wire-events.ts` (Messages SSE → canonical events), `upstream-errors.ts`.
 */
import { Effect, Stream } from "effect"
import { Pool } from "undici"
import type { CanonicalEvent } from "../../model/events.ts"
import type { CanonicalRequest } from "../../model/request.ts"
import { countText } from "../../model/tokenizer.ts"
import type { Backend, PlacementRuntime } from "../backend.ts"
import { BackendError } from "../backend.ts"
import type { SseEvent } from "./sse-parser.ts"
import { makeSseParser } from "./sse-parser.ts"
import { connectionError, errorFromResponse } from "./upstream-errors.ts"
import type { TranslateStep, UpstreamTranslator } from "./wire-events.ts"
import { makeUpstreamTranslator } from "./wire-events.ts"
import { toWireRequest } from "./wire-request.ts"

export const ANTHROPIC_VERSION = "2023-06-01"

export interface AnthropicBackend extends Backend {
  /** Closes every connection pool (shutdown, tests). */
  close(): Promise<void>
}

/** `<baseUrl>/v1/messages`; a base URL that already ends in `/v1` is not given a second one. */
export const messagesUrl = (baseUrl: string): URL => {
  const url = new URL(baseUrl)
  const path = url.pathname.replace(/\/+$/, "")
  url.pathname = path.endsWith("/v1") ? `${path}/messages` : `${path}/v1/messages`
  return url
}

/** Runs parsed SSE events through the translator until the first error. */
const translateAll = (translator: UpstreamTranslator, events: ReadonlyArray<SseEvent>): TranslateStep => {
  const out: Array<CanonicalEvent> = []
  for (const sse of events) {
    const step = translator.push(sse)
    out.push(...step.events)
    if (step.error !== undefined) return { events: out, error: step.error }
  }
  return { events: out }
}

/**
 * A step's events, then its error: events decoded before an error in the same chunk still count.
 * The step that ends the answer gets its reasoning tokens counted when the upstream did not report
 * them (in the tokenizer thread; at most the output tokens).
 */
const emit = (translator: UpstreamTranslator, step: TranslateStep): Stream.Stream<CanonicalEvent, BackendError> => {
  const stop = step.events.at(-1)
  const thinking = translator.unreportedThinking
  const events = stop?.type === "message_stop" && thinking !== undefined
    ? Stream.fromIterableEffect(Effect.map(countText(thinking), (counted) => [
      ...step.events.slice(0, -1),
      { ...stop, usage: { ...stop.usage, reasoningTokens: Math.min(counted, stop.usage.outputTokens) } }
    ]))
    : Stream.fromIterable(step.events)
  return step.error === undefined ? events : Stream.concat(events, Stream.fail(step.error))
}

/** The upstream body (bytes of Messages SSE) as canonical events. */
const canonicalEvents = (body: AsyncIterable<Uint8Array>, modelId: string) =>
  Stream.suspend(() => {
    const decoder = new TextDecoder()
    const parser = makeSseParser()
    const translator = makeUpstreamTranslator(modelId)
    const chunks = Stream.fromAsyncIterable(body, connectionError).pipe(
      Stream.flatMap((bytes) => emit(translator, translateAll(translator, parser.feed(decoder.decode(bytes, { stream: true })))))
    )
    // Whatever the last bytes completed, then the translator's verdict on how the stream ended.
    const finish = (): TranslateStep => {
      const last = translateAll(translator, [...parser.feed(decoder.decode()), ...parser.end()])
      if (last.error !== undefined) return last
      const end = translator.end()
      return { events: [...last.events, ...end.events], ...(end.error === undefined ? {} : { error: end.error }) }
    }
    return Stream.concat(chunks, Stream.suspend(() => emit(translator, finish())))
  })

const readText = (body: { text(): Promise<string> }) => Effect.promise(() => body.text().catch(() => ""))

export const makeAnthropicBackend = (): AnthropicBackend => {
  const pools = new Map<string, Pool>()
  const poolFor = (origin: string): Pool => {
    let pool = pools.get(origin)
    if (pool === undefined) {
      pool = new Pool(origin, { keepAliveTimeout: 30_000 })
      pools.set(origin, pool)
    }
    return pool
  }

  const open = Effect.fnUntraced(function*(request: CanonicalRequest, placement: PlacementRuntime) {
    const upstream = placement.upstream
    if (upstream === undefined) {
      return yield* new BackendError({ status: 500, type: "api_error", message: `Placement ${placement.id} has no upstream baseUrl`, retryable: false })
    }
    const url = messagesUrl(upstream.baseUrl)
    const body = JSON.stringify(toWireRequest(request, placement))
    const headers = {
      "content-type": "application/json",
      accept: "text/event-stream",
      "anthropic-version": ANTHROPIC_VERSION,
      ...(upstream.apiKey === undefined ? {} : { "x-api-key": upstream.apiKey })
    }
    // Aborts the upstream call when the stream ends early (client gone, failover); a no-op after a full read.
    const abort = new AbortController()
    yield* Effect.addFinalizer(() => Effect.sync(() => abort.abort()))
    const response = yield* Effect.tryPromise({
      try: () => poolFor(url.origin).request({ method: "POST", path: url.pathname + url.search, headers, body, signal: abort.signal }),
      catch: connectionError
    })
    if (response.statusCode < 200 || response.statusCode >= 300) {
      return yield* errorFromResponse(response.statusCode, response.headers, yield* readText(response.body), placement)
    }
    const contentType = String(response.headers["content-type"] ?? "")
    if (!contentType.includes("text/event-stream")) {
      yield* readText(response.body)
      return yield* new BackendError({
        status: 502,
        type: "api_error",
        message: `The upstream answered ${contentType || "without a content type"} instead of an event stream`,
        retryable: true
      })
    }
    return canonicalEvents(response.body, placement.modelId)
  })

  return {
    kind: "anthropic",
    stream: (request, placement) => Stream.unwrap(open(request, placement)),
    close: async () => {
      const all = [...pools.values()]
      pools.clear()
      await Promise.all(all.map((pool) => pool.close()))
    }
  }
}
