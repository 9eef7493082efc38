/**
 * The Anthropic backend: serves a placement from an upstream that speaks the Messages API.
 *
 * `stream` streams upstream; `complete` (a client that asked for one JSON body) calls the upstream
 * without streaming and runs its message through the same translator. Calls go through undici `Pool`s (one per origin, created on first use, kept
 * alive between calls), never `fetch`, which measured several times slower as a proxy. A client
 * that goes away aborts the upstream request.
 *
 * The pure halves live beside this file: `wire-request.ts` (canonical → Messages request),
 * `wire-events.ts` (Messages SSE, read by `../upstream/sse.ts`, → canonical events); failures map as in `../upstream/upstream.ts`.
 */
import { Effect, Stream } from "effect"
import { countText } from "../../model/tokenizer.ts"
import { type CanonicalEvent, type CanonicalResponse, collect } from "../../model/events.ts"
import type { CanonicalRequest } from "../../model/request.ts"
import type { Backend, PlacementRuntime } from "../backend.ts"
import { BackendError, backendErrorFromStatus } from "../backend.ts"
import { type SseEvent, sseEvents, SseLineTooLong, type SseReader } from "../upstream/sse.ts"
import { type BodyDecoder, decodeBody, type DecodeStep, decodeWhole } from "../decode-stream.ts"
import { connectionError, errorFromResponse, makeUpstreamPools } from "../upstream/upstream.ts"
import type { TranslateStep, UpstreamTranslator } from "./wire-events.ts"
import { makeUpstreamTranslator, messageAsEvents } from "./wire-events.ts"
import { wireRequest } from "./wire-request.ts"
import { isLarge, jsonTextInSlices } from "../../util/sliced-stringify.ts"
import { runInSlices } from "../../util/slices.ts"
import { requestBody, sendable, upstreamBody } from "../upstream/upstream-body.ts"
import { callStreamed, callWhole, destroyBody, errorText, parseWholeJson, type StreamedBody } from "../upstream/upstream-call.ts"
import { traceHeadersOf } from "../../observability/tracing.ts"
import { emptyKeepingCapacity } from "../../util/arrays.ts"
import { acquireInterruptible, unwrapPlain } from "../../util/scoped.ts"

const ANTHROPIC_VERSION = "2023-06-01"

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
  // One event a read, as a model streams its tokens: its own step, with no array to join them.
  if (events.length === 1) return translator.push(events[0]!)
  const out: Array<CanonicalEvent> = []
  for (const sse of events) {
    const step = translator.push(sse)
    for (const event of step.events) out.push(event)
    if (step.error !== undefined) return { events: out, error: step.error }
  }
  return { events: out }
}

/**
 * A read's SSE events, between the parser and the translator: one list for every stream, emptied
 * after each read (keeping its backing store). A read is translated synchronously, start to end,
 * so no two reads ever share it.
 */
const READ_EVENTS: Array<SseEvent> = []

const translateRead = (translator: UpstreamTranslator, parser: SseReader<SseEvent>, text: string, last: boolean): TranslateStep => {
  try {
    let tooLong: SseLineTooLong | undefined
    try {
      parser.feed(text, READ_EVENTS)
      if (last) parser.end(READ_EVENTS)
    } catch (error) {
      if (!(error instanceof SseLineTooLong)) throw error
      tooLong = error
    }
    // The events the read completed go out, then the line that outgrew the limit ends the stream.
    const step = translateAll(translator, READ_EVENTS)
    return tooLong === undefined || step.error !== undefined ? step : { events: step.events, error: backendErrorFromStatus(502, tooLong.message) }
  } finally {
    emptyKeepingCapacity(READ_EVENTS)
  }
}

/**
 * The events that end the answer, with its reasoning tokens counted (in the tokenizer thread; at
 * most the output tokens) when the upstream did not report them.
 */
const withThinking = (translator: UpstreamTranslator) => (events: ReadonlyArray<CanonicalEvent>): Effect.Effect<ReadonlyArray<CanonicalEvent>> => {
  const stop = events.at(-1)
  const thinking = translator.unreportedThinking
  if (stop?.type !== "message_stop" || thinking === undefined) return Effect.succeed(events)
  return Effect.map(countText(thinking), (counted) => [
    ...events.slice(0, -1),
    { ...stop, usage: { ...stop.usage, reasoningTokens: Math.min(counted, stop.usage.outputTokens) } }
  ])
}

/**
 * One streamed answer's decoding (bytes → SSE events → canonical events), one step per read. A
 * class, its steps as methods: an open stream holds this one object, not a closure per step.
 */
class MessagesDecoder implements BodyDecoder {
  readonly #text = new TextDecoder()
  readonly #parser = sseEvents()
  readonly #translator: UpstreamTranslator
  readonly finish: (events: ReadonlyArray<CanonicalEvent>) => Effect.Effect<ReadonlyArray<CanonicalEvent>>

  constructor(modelId: string) {
    this.#translator = makeUpstreamTranslator(modelId)
    this.finish = withThinking(this.#translator)
  }

  feed(bytes: Uint8Array): DecodeStep {
    return translateRead(this.#translator, this.#parser, this.#text.decode(bytes, { stream: true }), false)
  }

  /** Whatever the last bytes completed, then the translator's verdict on how the stream ended. */
  end(): DecodeStep {
    const last = translateRead(this.#translator, this.#parser, this.#text.decode(), true)
    if (last.error !== undefined) return last
    const end = this.#translator.end()
    return { events: [...last.events, ...end.events], ...(end.error === undefined ? {} : { error: end.error }) }
  }
}

/** The upstream body (bytes of Messages SSE) as canonical events, one step per read. */
const canonicalEvents = (body: StreamedBody, modelId: string) => Stream.suspend(() => decodeBody(body, new MessagesDecoder(modelId)))

const readText = (body: { text(): Promise<string> }) => Effect.promise(() => body.text().catch(() => ""))

/**
 * The Messages body of `request` for `placement`, translated in slices: a JSON schema goes upstream
 * as text inside a system instruction, and a large one's text is made first, in slices of its own
 * (`JSON.stringify` of a 15 MiB schema holds the event loop 100–300 ms); then the messages, with a
 * pause every few (16,000 messages are milliseconds of translating).
 */
export const anthropicWireBody = (request: CanonicalRequest, placement: PlacementRuntime, stream: boolean): Effect.Effect<Record<string, unknown>> => {
  const format = request.responseFormat
  const schemaText: Effect.Effect<string | undefined> = format.type === "json_schema" && isLarge(format.schema) ? jsonTextInSlices(format.schema) : Effect.succeed(undefined)
  return Effect.flatMap(schemaText, (text) => runInSlices(wireRequest(request, placement, stream, text)))
}

export const makeAnthropicBackend = (): AnthropicBackend => {
  const pools = makeUpstreamPools()
  const poolFor = (origin: string) => pools.get(origin)

  /**
   * The call to make; the body is serialized in slices when large (`upstream-body.ts`). `trace`:
   * the W3C `traceparent` of the attempt's span, when traces are exported.
   */
  const target = (request: CanonicalRequest, placement: PlacementRuntime, stream: boolean, trace: Readonly<Record<string, string>>) => {
    const upstream = placement.upstream
    if (upstream === undefined) {
      return Effect.fail(new BackendError({ status: 500, type: "api_error", message: `Placement ${placement.id} has no upstream baseUrl`, retryable: false }))
    }
    const url = messagesUrl(upstream.baseUrl)
    const headers = {
      "content-type": "application/json",
      accept: stream ? "text/event-stream" : "application/json",
      "anthropic-version": ANTHROPIC_VERSION,
      ...trace,
      ...(upstream.apiKey === undefined ? {} : { "x-api-key": upstream.apiKey })
    }
    return anthropicWireBody(request, placement, stream).pipe(
      Effect.flatMap(upstreamBody),
      Effect.map((body) => ({ url, ...requestBody(sendable(body), headers) }))
    )
  }

  const complete = (request: CanonicalRequest, placement: PlacementRuntime): Effect.Effect<CanonicalResponse, BackendError> =>
    Effect.withFiber((fiber) => Effect.flatMap(target(request, placement, false, traceHeadersOf(fiber)), (call) => {
      return Effect.tryPromise({
        try: (signal) => callWhole(poolFor(call.url.origin), { method: "POST", path: call.url.pathname + call.url.search, headers: call.headers, body: call.body }, signal),
        catch: connectionError
      }).pipe(Effect.flatMap((answer) => {
        const { status, headers } = answer
        if (status < 200 || status >= 300) return Effect.fail(errorFromResponse(status, headers, errorText(answer), placement))
        // An upstream that streams whatever `stream` says: decoded as a stream's reads are (in slices).
        if (String(headers["content-type"] ?? "").includes("text/event-stream")) return Effect.map(decodeWhole(answer.chunks, new MessagesDecoder(placement.modelId)), collect)
        return Effect.flatMap(parseWholeJson(answer), (body) => {
          const translator = makeUpstreamTranslator(placement.modelId)
          const events: Array<CanonicalEvent> = []
          for (const step of [...messageAsEvents(body).map((event) => translator.pushEvent(event)), translator.end()]) {
            for (const event of step.events) events.push(event)
            if (step.error !== undefined) return Effect.fail(step.error)
          }
          return Effect.map(withThinking(translator)(events), collect)
        })
      }))
    }))

  const open = Effect.fnUntraced(function*(request: CanonicalRequest, placement: PlacementRuntime) {
    const { url, body, headers } = yield* target(request, placement, true, yield* Effect.withFiber((fiber) => Effect.succeed(traceHeadersOf(fiber))))
    // Interrupted before the headers, the call is aborted at once; after, the body is released
    // when the stream's scope closes: a stream that ends early (client gone, failover) aborts the
    // call, a no-op after a full read.
    const response = yield* acquireInterruptible(
      Effect.tryPromise({
        try: (signal) => callStreamed(poolFor(url.origin), { method: "POST", path: url.pathname + url.search, headers, body }, signal),
        catch: connectionError
      }),
      destroyBody
    )
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
    stream: (request, placement) => unwrapPlain(open(request, placement)),
    complete,
    close: () => pools.close()
  }
}
