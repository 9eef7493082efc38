/**
 * The live placements and the backends that serve them, built once from the catalog. Each
 * placement's `PlacementRuntime` holds mutable fault settings (admin fault injection); the
 * backends keep undici pools that close with the layer.
 */
import { Context, Effect, Layer } from "effect"
import { makeAnthropicBackend } from "../backends/anthropic/index.ts"
import type { Backend, PlacementRuntime } from "../backends/backend.ts"
import { makeOpenAICompatibleBackend } from "../backends/openai-compatible/index.ts"
import { makeSimulatorBackend } from "../backends/simulator/simulator.ts"
import { Catalog } from "../catalog/catalog.ts"
import { Settings } from "../config/settings.ts"
import { startTokenizer } from "../model/tokenizer.ts"
import type { Placement } from "../config/schema.ts"

interface ServingPlacement {
  readonly runtime: PlacementRuntime
  readonly backend: Backend
  readonly config: Placement
}

export interface PlacementsShape {
  /** Every placement whose backend is available, by placement id. */
  readonly byId: ReadonlyMap<string, ServingPlacement>
  /** A model's placements in config order (its own preference order). */
  ofModel(modelId: string): ReadonlyArray<ServingPlacement>
}

/**
 * Backends that can continue a broken text answer from an assistant prefix: Anthropic honors a
 * trailing assistant message natively ("prefill"), and so does the simulator. OpenAI-compatible
 * upstreams have no such contract, so a break there ends with the dialect's error event.
 */
export const canResumeFromPrefix = (backend: Backend) => backend.kind === "simulator" || backend.kind === "anthropic"

export class Placements extends Context.Service<Placements, PlacementsShape>()("gateway/runtime/Placements") {
  static readonly layer = Layer.effect(Placements, Effect.gen(function*() {
    const catalog = yield* Catalog
    const { lookupEnv } = yield* Settings
    const simulator = makeSimulatorBackend()
    const closing = (make: () => Backend & { close(): unknown }) =>
      Effect.acquireRelease(Effect.sync(make), (b) => Effect.promise(() => Promise.resolve(b.close())).pipe(Effect.ignore))
    const anthropic = yield* closing(makeAnthropicBackend)
    const openai = yield* closing(makeOpenAICompatibleBackend)
    const backends: Record<string, Backend | undefined> = { simulator, anthropic, "openai-compatible": openai }

    const byId = new Map<string, ServingPlacement>()
    const byModel = new Map<string, Array<ServingPlacement>>()
    for (const { placement, modelId } of catalog.placements.values()) {
      const backend = backends[placement.backend]
      if (backend === undefined) continue
      const runtime: PlacementRuntime = {
        id: placement.id,
        modelId,
        upstreamModel: placement.upstreamModel ?? modelId,
        reasoning: catalog.chatModel(modelId)?.capabilities.reasoning ?? false,
        simulator: placement.simulator,
        upstream: placement.baseUrl === undefined
          ? undefined
          : { baseUrl: placement.baseUrl, apiKey: placement.apiKeyEnv === undefined ? undefined : lookupEnv(placement.apiKeyEnv) },
        faults: { mode: "none" }
      }
      const serving = { runtime, backend, config: placement }
      byId.set(placement.id, serving)
      byModel.set(modelId, [...(byModel.get(modelId) ?? []), serving])
    }
    // Simulator placements count every call exactly: start the tokenizer thread (and its table
    // loading) with the gateway rather than at the first request. Without them it starts only
    // if something asks for an exact count.
    if ([...byId.values()].some((serving) => serving.backend === simulator)) startTokenizer()
    return Placements.of({ byId, ofModel: (modelId) => byModel.get(modelId) ?? [] })
  }))
}
