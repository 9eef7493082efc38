/**
 * The OpenAI-compatible backend: serves a placement by calling an upstream's Chat Completions
 * endpoint (streaming, with usage) and translating its chunks into canonical events.
 *
 *   canonical request ─wire-request.ts─▶ JSON body ─upstream-http.ts─▶ bytes
 *     ─sse-decoder.ts─▶ data payloads ─chunk-parser.ts─▶ canonical events
 *
 * The upstream's model name never reaches the client: events name the catalog model, and error
 * messages have the upstream model name replaced by the catalog id.
 */
import { Effect, Stream } from "effect"
import { countText } from "../../model/tokenizer.ts"
import { countRequestTokens } from "../../model/tokens.ts"
import { makeUsage } from "../../model/usage.ts"
import type { CanonicalEvent } from "../../model/events.ts"
import type { CanonicalRequest } from "../../model/request.ts"
import type { Backend, PlacementRuntime } from "../backend.ts"
import { BackendError, backendErrorFromStatus } from "../backend.ts"
import { makeChunkParser } from "./chunk-parser.ts"
import { makeSseDecoder } from "./sse-decoder.ts"
import { makeUpstreamPools, postForStream } from "./upstream-http.ts"
import { chatCompletionsTarget, toWireRequest, UnsupportedContent } from "./wire-request.ts"

export { chatCompletionsTarget, toWireRequest } from "./wire-request.ts"

export interface OpenAICompatibleBackend extends Backend {
  /** Closes the connection pools (tests, shutdown). */
  close(): Promise<void>
}

const scrubber = (placement: PlacementRuntime) => (error: BackendError): BackendError => {
  const name = placement.upstreamModel
  if (name === "" || name === placement.modelId || !error.message.includes(name)) return error
  return new BackendError({
    status: error.status,
    type: error.type,
    message: error.message.replaceAll(name, placement.modelId),
    retryable: error.retryable,
    ...(error.retryAfterSeconds === undefined ? {} : { retryAfterSeconds: error.retryAfterSeconds })
  })
}

const asBackendError = (error: unknown): BackendError =>
  error instanceof BackendError ? error : backendErrorFromStatus(502, `the upstream stream could not be read: ${String(error)}`)

export const makeOpenAICompatibleBackend = (): OpenAICompatibleBackend => {
  const pools = makeUpstreamPools()

  const prepare = (request: CanonicalRequest, placement: PlacementRuntime) => {
    if (placement.upstream === undefined) {
      return { error: new BackendError({ status: 500, type: "api_error", message: `placement ${placement.id} has no upstream baseUrl`, retryable: false }) }
    }
    try {
      const { origin, path } = chatCompletionsTarget(placement.upstream.baseUrl)
      return { call: { origin, path, target: placement.upstream, body: JSON.stringify(toWireRequest(request, placement)) } }
    } catch (error) {
      if (error instanceof UnsupportedContent) return { error: backendErrorFromStatus(400, error.message) }
      const message = `placement ${placement.id} has an invalid upstream baseUrl`
      return { error: new BackendError({ status: 500, type: "api_error", message, retryable: false }) }
    }
  }

  const stream = (request: CanonicalRequest, placement: PlacementRuntime): Stream.Stream<CanonicalEvent, BackendError> =>
    Stream.suspend(() => {
      const prepared = prepare(request, placement)
      if (prepared.error !== undefined) return Stream.fail(prepared.error)
      const sse = makeSseDecoder()
      const decoder = new TextDecoder()
      const parser = makeChunkParser({
        modelId: placement.modelId,
        visibleReasoning: request.reasoning.enabled && request.reasoning.visible
      })
      /** The final events, with the usage estimated exactly (tokenizer thread) when the upstream sent none. */
      const withUsage = (events: Array<CanonicalEvent>): Stream.Stream<CanonicalEvent> => {
        const stop = events.at(-1)
        const unreported = parser.unreported
        if (stop?.type !== "message_stop" || unreported === undefined) return Stream.fromIterable(events)
        return Stream.fromIterableEffect(
          Effect.map(
            Effect.all([countRequestTokens(request), countText(unreported.generated)]),
            ([inputTokens, outputTokens]) => [...events.slice(0, -1), { ...stop, usage: makeUsage({ inputTokens, outputTokens }) }]
          )
        )
      }
      // Events decoded before a failure in the same read are still delivered, then the failure.
      const parse = (text: string, last: boolean): Stream.Stream<CanonicalEvent, BackendError> => {
        const events: Array<CanonicalEvent> = []
        try {
          const payloads = last ? [...sse.feed(text), ...sse.end()] : sse.feed(text)
          for (const data of payloads) events.push(...parser.push(data))
          if (last) events.push(...parser.end())
        } catch (error) {
          return Stream.concat(Stream.fromIterable(events), Stream.fail(asBackendError(error)))
        }
        return withUsage(events)
      }
      return postForStream(pools, prepared.call).pipe(
        Stream.flatMap((bytes) => parse(decoder.decode(bytes, { stream: true }), false)),
        Stream.concat(Stream.suspend(() => parse(decoder.decode(), true))),
        Stream.mapError(scrubber(placement))
      )
    })

  return { kind: "openai-compatible", stream, close: () => pools.close() }
}
