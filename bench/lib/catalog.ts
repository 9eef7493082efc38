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
