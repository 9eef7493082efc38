/**
 * How catalog models look on the wire: the spec's entry (OpenAI list shape plus capabilities,
 * limits and list pricing) and the Messages dialect's per-item shape. No backend or placement
 * ever appears here.
 */
import type { CatalogModel } from "./catalog.ts"

export const toCatalogEntry = (entry: CatalogModel) => {
  if (entry.kind === "chat") {
    const m = entry.model
    return {
      id: m.id,
      object: "model" as const,
      created: m.created,
      owned_by: m.ownedBy,
      display_name: m.displayName,
      aliases: m.aliases ?? [],
      tier: m.tier,
      preview: m.preview ?? false,
      context_window: m.contextWindow,
      max_output: m.maxOutput,
      capabilities: { ...m.capabilities },
      pricing_usd_per_mtok: { input: m.pricing.input, output: m.pricing.output, cached_input: m.pricing.cachedInput },
      supported_parameters: m.supportedParameters,
      native_wires: m.nativeWires
    }
  }
  const m = entry.model
  return {
    id: m.id,
    object: "model" as const,
    created: m.created ?? 0,
    owned_by: m.ownedBy ?? "svc",
    display_name: m.displayName ?? m.id,
    aliases: m.aliases ?? [],
    tier: "embedding",
    preview: false,
    context_window: m.maxInputTokens ?? 8192,
    max_output: null,
    capabilities: { tools: false, reasoning: false, vision: false, documents: false },
    pricing_usd_per_mtok: { input: m.pricing.input, output: 0, cached_input: null },
    supported_parameters: m.flexibleDimensions
      ? ["input", "encoding_format", "dimensions", "user"]
      : ["input", "encoding_format", "user"],
    native_wires: ["embeddings"],
    dimensions: m.dimensions
  }
}

export const toMessagesDialectEntry = (entry: CatalogModel) => ({
  type: "model" as const,
  id: entry.model.id,
  display_name: entry.model.displayName ?? entry.model.id,
  created_at: new Date(((entry.kind === "chat" ? entry.model.created : entry.model.created) ?? 0) * 1000).toISOString()
})
