/** The one shape of catalog model every benchmark suite configures: cheap, plain, no capabilities. */
export const benchChatModel = (id: string, displayName: string, placements: ReadonlyArray<Record<string, unknown>>) => ({
  id,
  displayName,
  ownedBy: "svc",
  created: 1767225600,
  tier: "workhorse",
  contextWindow: 128000,
  maxOutput: 4096,
  capabilities: { tools: false, reasoning: false, vision: false, documents: false },
  pricing: { input: 0.1, output: 0.4, cachedInput: null },
  supportedParameters: ["messages", "max_tokens", "stream"],
  nativeWires: ["chat_completions"],
  placements
})

/**
 * The gateway config of the hot-path measurements (hot-path, alloc-profile): one model,
 * `svc-bench`, on one uncapped placement in front of the fixed-answer upstream at `upstreamUrl`
 * (spoken to as an OpenAI-compatible server, or as Anthropic's Messages API with `anthropic`),
 * and a plan whose limits never bind.
 */
export const fixedUpstreamConfig = (upstreamUrl: string, backend: "openai-compatible" | "anthropic" = "openai-compatible") => ({
  models: [benchChatModel("svc-bench", "bench", [{ id: "bench-up", backend, capacity: 100000, baseUrl: `${upstreamUrl}/v1`, upstreamModel: "fixed" }])],
  embeddingModels: [],
  plans: { bench: { allowanceUsd: 1_000_000, rpm: 10_000_000, tpm: 10_000_000_000, concurrency: 100_000 } },
  defaultPlan: "bench"
})
