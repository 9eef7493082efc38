/**
 * The model catalog: what `GET /v1/models` shows and what chat endpoints resolve a `model` to.
 * Built once from the config file; lookups are map reads.
 *
 * Resolution rules (spec):
 *  - catalog endpoints: canonical id, alias, or the bare id without `svc-`; no compatibility handles;
 *  - chat/embedding endpoints: canonical id, alias, or a compatibility handle (stock SDK names).
 * Preview models resolve everywhere but are absent from the list.
 */
import { Context, Effect, Layer } from "effect"
import { ConfigFile } from "../config/config-file.ts"
import type { ChatModel, EmbeddingModel, GatewayConfig, Placement } from "../config/schema.ts"

export type CatalogModel =
  | { readonly kind: "chat"; readonly model: ChatModel }
  | { readonly kind: "embedding"; readonly model: EmbeddingModel }

export interface CatalogShape {
  /** Every model shown by `GET /v1/models`, in config order (chat models first). */
  readonly listed: ReadonlyArray<CatalogModel>
  /** For `/v1/models/{id}`: canonical id, alias, or bare id without `svc-`. */
  resolveForCatalog(id: string): CatalogModel | undefined
  /** For chat endpoints: canonical id, alias or compatibility handle. */
  resolveChat(name: string): ChatModel | undefined
  /** Whether `name` resolves through a compatibility handle (a stock SDK name), not an id or alias. */
  isCompatibilityHandle(name: string): boolean
  /** For `/v1/embeddings`: canonical id, alias or compatibility handle. */
  resolveEmbedding(name: string): EmbeddingModel | undefined
  chatModel(id: string): ChatModel | undefined
  /** Every placement of every model, by placement id. */
  readonly placements: ReadonlyMap<string, { readonly placement: Placement; readonly modelId: string }>
}

export const makeCatalog = (config: GatewayConfig): CatalogShape => {
  const byName = new Map<string, CatalogModel>()
  const placements = new Map<string, { placement: Placement; modelId: string }>()
  const all: Array<CatalogModel> = [
    ...config.models.map((model) => ({ kind: "chat" as const, model })),
    ...(config.embeddingModels ?? []).map((model) => ({ kind: "embedding" as const, model }))
  ]
  for (const entry of all) {
    byName.set(entry.model.id, entry)
    for (const alias of entry.model.aliases ?? []) byName.set(alias, entry)
    for (const placement of entry.model.placements) placements.set(placement.id, { placement, modelId: entry.model.id })
  }
  const handles = new Map<string, CatalogModel>()
  for (const [handle, target] of Object.entries(config.compatibilityHandles ?? {})) {
    const entry = byName.get(target)
    if (entry !== undefined) handles.set(handle, entry)
  }
  const resolveForCatalog = (id: string) => byName.get(id) ?? (id.startsWith("svc-") ? undefined : byName.get(`svc-${id}`))
  const resolveAny = (name: string) => byName.get(name) ?? handles.get(name)
  return {
    listed: all.filter((entry) => entry.kind === "embedding" || entry.model.preview !== true),
    resolveForCatalog,
    resolveChat: (name) => {
      const entry = resolveAny(name)
      return entry?.kind === "chat" ? entry.model : undefined
    },
    isCompatibilityHandle: (name) => !byName.has(name) && handles.has(name),
    resolveEmbedding: (name) => {
      const entry = resolveAny(name)
      return entry?.kind === "embedding" ? entry.model : undefined
    },
    chatModel: (id) => {
      const entry = byName.get(id)
      return entry?.kind === "chat" && entry.model.id === id ? entry.model : undefined
    },
    placements
  }
}

export class Catalog extends Context.Service<Catalog, CatalogShape>()("gateway/catalog/Catalog") {
  static readonly layer = Layer.effect(Catalog, Effect.gen(function*() {
    return Catalog.of(makeCatalog(yield* ConfigFile))
  }))
}
