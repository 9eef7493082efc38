/**
 * The simulator backend: a real backend that needs no network and never pretends to be a real
 * model. It answers deterministically (same model, content, temperature and seed → same reply),
 * honors the output ceiling, stop sequences, tools, reasoning and response formats (see
 * `reply.ts` and `script.ts`), paces its output per placement and obeys injected faults.
 *
 * Timing per placement (`placement.simulator`):
 * - `ttftMs` (default 0): delay before the first event (`message_start`);
 * - `tokensPerSecond` (default 0 = no pacing): each delta waits for its tokens (3 per delta);
 *   hidden reasoning waits for its tokens before the first visible block;
 * - with both at 0 the whole reply is emitted at once, which is what fast tests want. Delays use
 *   Effect's Clock, so `TestClock.adjust` drives them in tests.
 *
 * Faults (`placement.faults`, read on every call; `rate` picks the affected share of calls with a
 * per-placement deterministic sequence):
 * - `error`: fails at once with `status` (default 500; a 429 carries retryAfterSeconds 1);
 * - `hang`: never emits;
 * - `slow`: ttft ×10 and tokens/s ÷10, unset values counting as 100 ms and 50 tokens/s (so a
 *   zero-delay placement becomes 1 s to first event, then 5 tokens/s);
 * - `break-mid-stream`: emits up to the second content delta, then fails with `status`
 *   (default 500). For embeddings it acts like `error`.
 */
import { Effect, Stream } from "effect"
import type { CanonicalEvent } from "../../model/events.ts"
import type { CanonicalRequest } from "../../model/request.ts"
import { countTexts } from "../../model/tokenizer.ts"
import type { Backend, EmbedRequest, EmbedResult, FaultSettings, PlacementRuntime } from "../backend.ts"
import { BackendError, backendErrorFromStatus } from "../backend.ts"
import { hashingEmbeddingSteps } from "./embeddings.ts"
import { hashParts, makePrng, seedFrom } from "./prng.ts"
import { makePromptCache, type PromptJson, promptJson, promptPrefixes } from "./prompt-cache.ts"
import { splitPrefill } from "./reply.ts"
import type { ScriptStep } from "./script.ts"
import { writeScript } from "./script.ts"
import { unwrapPlain } from "../../util/scoped.ts"

export interface SimulatorBackendOptions {
  /** Prompt-cache prefixes remembered across all placements (least recently used dropped). */
  readonly promptCacheEntries?: number
}

interface Timing {
  readonly ttftMs: number
  readonly msPerToken: number
}

const timingOf = (placement: PlacementRuntime, slow: boolean): Timing => {
  let ttftMs = placement.simulator?.ttftMs ?? 0
  let tokensPerSecond = placement.simulator?.tokensPerSecond ?? 0
  if (slow) {
    // Unset values stand for 100 ms and 50 tokens/s, so "slow" is slow even on a zero-delay placement.
    ttftMs = Math.max(ttftMs, 100) * 10
    tokensPerSecond = (tokensPerSecond > 0 ? tokensPerSecond : 50) / 10
  }
  return { ttftMs, msPerToken: tokensPerSecond > 0 ? 1000 / tokensPerSecond : 0 }
}

const paced = (steps: ReadonlyArray<ScriptStep>, timing: Timing): Stream.Stream<CanonicalEvent> => {
  if (timing.ttftMs === 0 && timing.msPerToken === 0) return Stream.fromArray(steps.map((step) => step.event))
  return Stream.fromArray(steps).pipe(
    Stream.mapEffect((step, position) => {
      const delayMs = (position === 0 ? timing.ttftMs : 0) + step.tokens * timing.msPerToken
      return delayMs > 0 ? Effect.as(Effect.sleep(delayMs), step.event) : Effect.succeed(step.event)
    })
  )
}

const BREAK_AFTER_DELTAS = 2

/** The steps a broken stream gets out before failing: up to the second content delta. */
const beforeBreak = (steps: ReadonlyArray<ScriptStep>): ReadonlyArray<ScriptStep> => {
  let deltas = 0
  for (let i = 0; i < steps.length; i++) {
    const type = steps[i].event.type
    if (type === "text_delta" || type === "thinking_delta" || type === "tool_input_delta") {
      if (++deltas === BREAK_AFTER_DELTAS) return steps.slice(0, i + 1)
    }
  }
  return steps.slice(0, -1)
}

const faultError = (faults: FaultSettings, what: string): BackendError => {
  const status = faults.status ?? 500
  return backendErrorFromStatus(status, `simulated fault (${what}) with status ${status}`, status === 429 ? 1 : undefined)
}

/**
 * Seeds the reply: model, conversation content, temperature and seeds; not the ceiling or stops.
 * The content hash is that of JSON.stringify([system, messages, tools, responseFormat]), from the
 * JSON already made for the prompt cache, hashed in slices.
 */
const replySeed = Effect.fnUntraced(function*(whole: CanonicalRequest, json: PromptJson, placement: PlacementRuntime): Effect.fn.Return<number> {
  const { request } = splitPrefill(whole) // a continuation is seeded like the answer it continues
  const messages = json.messages.slice(0, request.messages.length)
  const separated = messages.flatMap((message, i) => (i === 0 ? message : [",", ...message]))
  const content = yield* hashParts(["[", ...json.system, ",[", ...separated, "],", ...json.tools, ",", ...json.responseFormat, "]"])
  return seedFrom([request.model, content, request.temperature, request.seed, placement.simulator?.seed])
})

/** A text's embedding (embeddings.ts), a slice at a time with a yield between: a 1 MiB text takes ~100 ms of CPU. */
export const embedInSlices = Effect.fnUntraced(function*(text: string, dimensions: number): Effect.fn.Return<Array<number>> {
  const steps = hashingEmbeddingSteps(text, dimensions)
  while (steps.next()) yield* Effect.yieldNow
  return steps.vector
})

export const makeSimulatorBackend = (options: SimulatorBackendOptions = {}): Backend => {
  const promptCache = makePromptCache(options.promptCacheEntries ?? 10_000)
  const faultDraws = new Map<string, number>()

  /** The fault this call suffers: the configured one for a `rate` share of calls, else none. */
  const drawFault = (placement: PlacementRuntime): FaultSettings["mode"] => {
    const { mode, rate = 1 } = placement.faults
    if (mode === "none") return "none"
    const draw = faultDraws.get(placement.id) ?? 0
    faultDraws.set(placement.id, draw + 1)
    return makePrng(seedFrom([placement.id, draw])).next() < rate ? mode : "none"
  }

  const script = Effect.fnUntraced(function*(request: CanonicalRequest, placement: PlacementRuntime): Effect.fn.Return<Array<ScriptStep>> {
    const json = yield* promptJson(request)
    return yield* writeScript({
      request,
      reasoningModel: placement.reasoning,
      model: request.model,
      seed: yield* replySeed(request, json, placement),
      prompt: Effect.flatMap(promptPrefixes(request, json), (prefixes) =>
        Effect.map(promptCache.readAndStore(`${placement.id}\u0000${request.cacheAffinity ?? ""}`, prefixes), (cachedInputTokens) => ({
          inputTokens: prefixes[prefixes.length - 1].tokens,
          cachedInputTokens
        })))
    })
  })

  type EventStream = Stream.Stream<CanonicalEvent, BackendError>
  const openStream = Effect.fnUntraced(
    function*(request: CanonicalRequest, placement: PlacementRuntime): Effect.fn.Return<EventStream> {
      const fault = drawFault(placement)
      if (fault === "error") return Stream.fail(faultError(placement.faults, "error"))
      if (fault === "hang") return Stream.never
      const steps = yield* script(request, placement)
      const timing = timingOf(placement, fault === "slow")
      if (fault === "break-mid-stream") {
        return Stream.concat(paced(beforeBreak(steps), timing), Stream.fail(faultError(placement.faults, "break-mid-stream")))
      }
      return paced(steps, timing)
    }
  )

  const embed = Effect.fn("SimulatorBackend.embed")(
    function*(request: EmbedRequest, placement: PlacementRuntime): Effect.fn.Return<EmbedResult, BackendError> {
      const fault = drawFault(placement)
      if (fault === "error" || fault === "break-mid-stream") return yield* faultError(placement.faults, fault)
      if (fault === "hang") return yield* Effect.never
      const { ttftMs } = timingOf(placement, fault === "slow")
      if (ttftMs > 0) yield* Effect.sleep(ttftMs)
      const counts = yield* countTexts(request.texts)
      const vectors: Array<Array<number>> = []
      for (const text of request.texts) vectors.push(yield* embedInSlices(text, request.dimensions))
      return { vectors, inputTokens: counts.reduce((sum, n) => sum + n, 0) }
    }
  )

  return {
    kind: "simulator",
    stream: (request, placement) => unwrapPlain(openStream(request, placement)),
    embed
  }
}

/** A placement runtime for the simulator with neutral defaults (no delay, no faults). */
export const simulatorPlacement = (
  init: Partial<Omit<PlacementRuntime, "modelId">> & Pick<PlacementRuntime, "modelId">
): PlacementRuntime => ({
  id: `${init.modelId}@simulator`,
  upstreamModel: init.modelId,
  reasoning: false,
  faults: { mode: "none" },
  ...init
})
