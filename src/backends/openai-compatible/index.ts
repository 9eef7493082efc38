/**
 * The OpenAI-compatible backend: serves a placement by calling an upstream's Chat Completions
 * endpoint and translating its chunks into canonical events.
 *
 *   stream:   canonical request ─wire-request.ts─▶ JSON body ─upstream-http.ts─▶ bytes
 *               ─../upstream/sse.ts─▶ data payloads ─chunk-parser.ts─▶ canonical events
 *   complete: canonical request ─▶ JSON body (stream: false) ─▶ one completion
 *               ─completionAsChunk─▶ the same chunk parser ─▶ events ─▶ one canonical response
 *
 * The upstream's model name never reaches the client: events name the catalog model, and error
 * messages have the upstream model name replaced by the catalog id.
 */
import { Effect, Stream } from "effect"
import { countText } from "../../model/tokenizer.ts"
import { countRequestTokens } from "../../model/tokens.ts"
import { makeUsage } from "../../model/usage.ts"
import { type CanonicalEvent, type CanonicalResponse, collect } from "../../model/events.ts"
import type { CanonicalRequest } from "../../model/request.ts"
import type { Backend, PlacementRuntime } from "../backend.ts"
import { BackendError, backendErrorFromStatus } from "../backend.ts"
import { type BodyDecoder, decodeBody, type DecodeStep, decodeWhole } from "../decode-stream.ts"
import { type ChunkParser, completionAsChunk, makeChunkParser } from "./chunk-parser.ts"
import { ssePayloads } from "../upstream/sse.ts"
import { makeUpstreamPools, scrubError } from "../upstream/upstream.ts"
import { sendable, upstreamBody } from "../upstream/upstream-body.ts"
import { postForStream, postForWhole, type UpstreamCall } from "./upstream-http.ts"
import { chatCompletionsTarget, largeToolInputs, type MadeArguments, UnsupportedContent, wireRequest } from "./wire-request.ts"
import { emptyKeepingCapacity } from "../../util/arrays.ts"
import { unwrapPlain } from "../../util/scoped.ts"
import { isLarge, jsonTextInSlices } from "../../util/sliced-stringify.ts"
import { runInSlices } from "../../util/slices.ts"

export { chatCompletionsTarget, toWireRequest } from "./wire-request.ts"

export interface OpenAICompatibleBackend extends Backend {
  /** Closes the connection pools (tests, shutdown). */
  close(): Promise<void>
}

const asBackendError = (error: unknown): BackendError =>
  error instanceof BackendError ? error : backendErrorFromStatus(502, `the upstream stream could not be read: ${String(error)}`)

const isUnsupported = (error: unknown): error is UnsupportedContent => error instanceof UnsupportedContent

/** The JSON texts of `large` tool-call inputs, made in slices (none: the translation's default). */
const madeArguments = (large: ReadonlyArray<object>): Effect.Effect<MadeArguments | undefined> => {
  if (large.length === 0) return Effect.succeed(undefined)
  const made = new Map<object, string>()
  return Effect.as(Effect.forEach(large, (input) => Effect.map(jsonTextInSlices(input), (text) => void made.set(input, text)), { discard: true }), made)
}

/**
 * The Chat Completions body of `request` for `placement`, translated in slices: a tool call's
 * `arguments` is its input's JSON text, and a large input's is made first, in slices of its own
 * (`JSON.stringify` of a 15 MiB input held the event loop 240–390 ms on a slow VM); then the
 * messages, with a pause every few (16,000 messages are milliseconds of translating).
 */
export const openAiWireBody = (request: CanonicalRequest, placement: PlacementRuntime, stream: boolean): Effect.Effect<Record<string, unknown>, UnsupportedContent> =>
  runInSlices(largeToolInputs(request, isLarge)).pipe(
    Effect.flatMap(madeArguments),
    Effect.flatMap((made) => runInSlices(wireRequest(request, placement, stream, made), isUnsupported))
  )

export const makeOpenAICompatibleBackend = (): OpenAICompatibleBackend => {
  const pools = makeUpstreamPools()

  /** The call to make: target and body (serialized in slices when large: `upstream-body.ts`). */
  const prepare = (request: CanonicalRequest, placement: PlacementRuntime, stream = true): Effect.Effect<UpstreamCall, BackendError> => {
    const upstream = placement.upstream
    if (upstream === undefined) {
      return Effect.fail(new BackendError({ status: 500, type: "api_error", message: `placement ${placement.id} has no upstream baseUrl`, retryable: false }))
    }
    let target: ReturnType<typeof chatCompletionsTarget>
    try {
      target = chatCompletionsTarget(upstream.baseUrl)
    } catch {
      const message = `placement ${placement.id} has an invalid upstream baseUrl`
      return Effect.fail(new BackendError({ status: 500, type: "api_error", message, retryable: false }))
    }
    const { origin, path } = target
    return openAiWireBody(request, placement, stream).pipe(
      Effect.mapError((error) => backendErrorFromStatus(400, error.message)),
      Effect.flatMap(upstreamBody),
      Effect.map((body) => ({ origin, path, target: upstream, body: sendable(body) }))
    )
  }

  const parserFor = (request: CanonicalRequest, placement: PlacementRuntime) =>
    makeChunkParser({
      modelId: placement.modelId,
      visibleReasoning: request.reasoning.enabled && request.reasoning.visible
    })

  /**
   * The events that end the answer, with its usage counted exactly (in the tokenizer thread) when
   * the upstream reported none, so metering never settles a call at zero — or, where the upstream
   * had promised usage and the text was not kept, its output at the parser's upper bound.
   */
  const withUsage = (request: CanonicalRequest, parser: ChunkParser, placement: PlacementRuntime) => (events: ReadonlyArray<CanonicalEvent>): Effect.Effect<ReadonlyArray<CanonicalEvent>> => {
    const stop = events.at(-1)
    const unreported = parser.unreported
    if (stop?.type !== "message_stop" || unreported === undefined) return Effect.succeed(events)
    const output = "generated" in unreported
      ? countText(unreported.generated)
      : Effect.as(Effect.logWarning(`placement ${placement.id}: the upstream put usage: null on its chunks but sent no usage; output charged at its upper bound (${unreported.atMostTokens} tokens, the text's UTF-8 size)`), unreported.atMostTokens)
    return Effect.map(
      Effect.all([countRequestTokens(request), output]),
      ([inputTokens, outputTokens]) => [...events.slice(0, -1), { ...stop, usage: makeUsage({ inputTokens, outputTokens }) }]
    )
  }

  const complete = (request: CanonicalRequest, placement: PlacementRuntime): Effect.Effect<CanonicalResponse, BackendError> =>
    Effect.flatMap(prepare(request, placement, false), (call) => {
      const parser = parserFor(request, placement)
      const finish = withUsage(request, parser, placement)
      return postForWhole(pools, call).pipe(
        Effect.flatMap((answer) =>
          // SSE bytes: decoded as a stream's reads are (in slices), by the stream's decoder.
          answer.kind === "sse" ? decodeWhole(answer.chunks, new ChunksDecoder(parser, placement, finish)) : Effect.flatMap(
            Effect.try({
              try: () => {
                const events = parser.pushChunk(completionAsChunk(answer.body))
                return parser.end(events)
              },
              catch: asBackendError
            }),
            finish
          )
        ),
        Effect.map((events) => collect(events)),
        Effect.mapError(scrubError(placement))
      )
    })

  // Every failure names the catalog's model, never the upstream's: the call's own (scrubbed once
  // here) and the stream's (an error event's message, scrubbed as it is decoded).
  const stream = (request: CanonicalRequest, placement: PlacementRuntime): Stream.Stream<CanonicalEvent, BackendError> =>
    unwrapPlain(Effect.flatMap(prepare(request, placement), (call) =>
      Effect.map(postForStream(pools, call), (body) => {
        const parser = parserFor(request, placement)
        return decodeBody(body, new ChunksDecoder(parser, placement, withUsage(request, parser, placement)))
      })).pipe(Effect.mapError(scrubError(placement))))

  return { kind: "openai-compatible", stream, complete, close: () => pools.close() }
}

/**
 * A read's SSE payloads, between the SSE decoder and the parser: one list for every stream, emptied
 * after each read (keeping its backing store). A read is decoded synchronously, start to end, so
 * no two reads ever share it; a list per stream would be kept by every open stream, and a new one
 * per read allocated per streamed token.
 */
const PAYLOADS: Array<string> = []

/**
 * One streamed answer's decoding (SSE text → chunks → canonical events; an error event's message
 * scrubbed as it is decoded). Fields and methods: an open stream holds this one object, not a
 * closure per step over a shared scope.
 */
class ChunksDecoder implements BodyDecoder {
  readonly #sse = ssePayloads()
  readonly #text = new TextDecoder()
  readonly #parser: ChunkParser
  readonly #placement: PlacementRuntime
  readonly finish: (events: ReadonlyArray<CanonicalEvent>) => Effect.Effect<ReadonlyArray<CanonicalEvent>>

  constructor(parser: ChunkParser, placement: PlacementRuntime, finish: (events: ReadonlyArray<CanonicalEvent>) => Effect.Effect<ReadonlyArray<CanonicalEvent>>) {
    this.#parser = parser
    this.#placement = placement
    this.finish = finish
  }

  feed(bytes: Uint8Array): DecodeStep {
    return this.parse(this.#text.decode(bytes, { stream: true }), false)
  }

  end(): DecodeStep {
    return this.parse(this.#text.decode(), true)
  }

  /** One array of events per read, handed on; the read's payloads go through one scratch list. */
  private parse(chunk: string, last: boolean): DecodeStep {
    const events: Array<CanonicalEvent> = []
    const payloads = PAYLOADS
    // The events of the payloads before a failing one go out; the failing one's own do not.
    let whole = 0
    try {
      this.#sse.feed(chunk, payloads)
      if (last) this.#sse.end(payloads)
      for (let i = 0; i < payloads.length; i++) {
        this.#parser.push(payloads[i]!, events)
        whole = events.length
      }
      if (last) this.#parser.end(events)
    } catch (error) {
      events.length = whole
      return { events, error: scrubError(this.#placement)(asBackendError(error)) }
    } finally {
      emptyKeepingCapacity(payloads)
    }
    return { events }
  }
}
