/**
 * Calls a catalog model: picks a placement, hands the canonical request to its backend, and says
 * which model served. This first version spreads requests round-robin over the model's placements;
 * the actor runtime (capacity queues, continuity failover, retries) replaces the choice, not the
 * interface.
 */
import { Context, Effect, Layer, Stream } from "effect"
import { Catalog } from "../catalog/catalog.ts"
import type { Placement } from "../config/schema.ts"
import type { Backend, BackendError, EmbedResult, PlacementRuntime } from "../backends/backend.ts"
import { makeAnthropicBackend } from "../backends/anthropic/index.ts"
import { makeOpenAICompatibleBackend } from "../backends/openai-compatible/index.ts"
import { makeSimulatorBackend } from "../backends/simulator/simulator.ts"
import { NotImplemented } from "../errors.ts"
import type { CanonicalEvent } from "../model/events.ts"
import type { CanonicalRequest } from "../model/request.ts"

export interface ModelCall {
  /** Canonical id of the model that serves this call (`xsvc-model`). */
  readonly servedModel: string
  readonly events: Stream.Stream<CanonicalEvent, BackendError>
}

export class ModelCaller extends Context.Service<ModelCaller, {
  /** Starts a chat call on `request.model` (a canonical id). */
  call(request: CanonicalRequest): Effect.Effect<ModelCall, NotImplemented>
  embed(model: string, texts: ReadonlyArray<string>, dimensions: number): Effect.Effect<EmbedResult & { servedModel: string }, BackendError | NotImplemented>
  /** Live placement state (faults are mutable), by placement id. */
  readonly placements: ReadonlyMap<string, PlacementRuntime>
}>()("gateway/runtime/ModelCaller") {
  static readonly layer = Layer.effect(ModelCaller, Effect.gen(function*() {
    const catalog = yield* Catalog
    const simulator = makeSimulatorBackend()
    // Upstream adapters keep undici pools; close them when the gateway stops.
    const anthropic = yield* Effect.acquireRelease(Effect.sync(makeAnthropicBackend), (b) => Effect.promise(() => Promise.resolve(b.close())).pipe(Effect.ignore))
    const openai = yield* Effect.acquireRelease(Effect.sync(makeOpenAICompatibleBackend), (b) => Effect.promise(() => Promise.resolve(b.close())).pipe(Effect.ignore))
    const backends: Record<string, Backend | undefined> = { simulator, anthropic, "openai-compatible": openai }
    const placements = new Map<string, PlacementRuntime>()
    const byModel = new Map<string, Array<PlacementRuntime>>()
    const toRuntime = (placement: Placement, modelId: string, reasoning: boolean): PlacementRuntime => ({
      id: placement.id,
      modelId,
      upstreamModel: placement.upstreamModel ?? modelId,
      reasoning,
      simulator: placement.simulator,
      upstream: placement.baseUrl === undefined
        ? undefined
        : { baseUrl: placement.baseUrl, apiKey: placement.apiKeyEnv === undefined ? undefined : process.env[placement.apiKeyEnv] },
      faults: { mode: "none" }
    })
    for (const { placement, modelId } of catalog.placements.values()) {
      const reasoning = catalog.chatModel(modelId)?.capabilities.reasoning ?? false
      const runtime = toRuntime(placement, modelId, reasoning)
      placements.set(placement.id, runtime)
      byModel.set(modelId, [...(byModel.get(modelId) ?? []), runtime])
    }
    const kinds = new Map([...catalog.placements.values()].map(({ placement }) => [placement.id, placement.backend]))
    let turn = 0

    const pick = (model: string) => {
      const candidates = (byModel.get(model) ?? []).filter((p) => backends[kinds.get(p.id)!] !== undefined)
      if (candidates.length === 0) {
        return Effect.fail(new NotImplemented({ message: `No placement of ${model} has an available backend` }))
      }
      const placement = candidates[turn++ % candidates.length]
      return Effect.succeed({ placement, backend: backends[kinds.get(placement.id)!]! })
    }

    const call = Effect.fn("ModelCaller.call")(function*(request: CanonicalRequest) {
      const { placement, backend } = yield* pick(request.model)
      return { servedModel: placement.modelId, events: backend.stream(request, placement) }
    })

    const embed = Effect.fn("ModelCaller.embed")(function*(model: string, texts: ReadonlyArray<string>, dimensions: number) {
      const { placement, backend } = yield* pick(model)
      if (backend.embed === undefined) return yield* new NotImplemented({ message: `The backend of ${model} cannot embed` })
      const result = yield* backend.embed({ model, texts, dimensions }, placement)
      return { ...result, servedModel: placement.modelId }
    })

    return ModelCaller.of({ call, embed, placements })
  }))
}
