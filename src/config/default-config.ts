/**
 * The built-in config: a realistic catalog served entirely by the simulator backend, so
 * `npm start` works offline. Display names say "simulated" so nobody mistakes these for real models.
 */
import type { GatewayConfig } from "./schema.ts"

const JAN_2026 = 1767225600
const CHAT_PARAMETERS = ["messages", "system", "max_tokens", "temperature", "top_p", "stop", "stream", "tools", "tool_choice"]
const REASONING_PARAMETERS = [...CHAT_PARAMETERS, "reasoning", "thinking"]

const sim = (id: string, capacity: number, ttftMs: number, tokensPerSecond: number) =>
  ({ id, backend: "simulator", capacity, simulator: { ttftMs, tokensPerSecond } }) as const

export const defaultConfig: GatewayConfig = {
  models: [
    {
      id: "svc-atlas-1", displayName: "Atlas 1 (simulated)", ownedBy: "svc", created: JAN_2026,
      tier: "frontier", aliases: ["atlas", "atlas-latest"], preview: false,
      contextWindow: 200000, maxOutput: 32000,
      capabilities: { tools: true, reasoning: true, vision: true, documents: true },
      pricing: { input: 3.0, output: 15.0, cachedInput: 0.3 },
      supportedParameters: REASONING_PARAMETERS, nativeWires: ["messages"],
      equivalents: ["svc-orion-2"],
      placements: [sim("atlas-a", 8, 150, 120), sim("atlas-b", 8, 180, 100)]
    },
    {
      id: "svc-orion-2", displayName: "Orion 2 (simulated)", ownedBy: "svc", created: JAN_2026,
      tier: "frontier", aliases: ["orion"], preview: false,
      contextWindow: 400000, maxOutput: 64000,
      capabilities: { tools: true, reasoning: true, vision: true, documents: true },
      pricing: { input: 5.0, output: 25.0, cachedInput: 0.5 },
      supportedParameters: REASONING_PARAMETERS, nativeWires: ["responses", "chat_completions"],
      equivalents: ["svc-atlas-1"],
      placements: [sim("orion-a", 6, 200, 90)]
    },
    {
      id: "svc-lyra-3", displayName: "Lyra 3 (simulated)", ownedBy: "svc", created: JAN_2026,
      tier: "premium", aliases: ["lyra"], preview: false,
      contextWindow: 128000, maxOutput: 16384,
      capabilities: { tools: true, reasoning: false, vision: true, documents: false },
      pricing: { input: 1.25, output: 5.0, cachedInput: 0.125 },
      supportedParameters: CHAT_PARAMETERS, nativeWires: ["chat_completions"],
      equivalents: ["svc-nova-mini"],
      placements: [sim("lyra-a", 16, 100, 180)]
    },
    {
      id: "svc-vega-2", displayName: "Vega 2 reasoning (simulated)", ownedBy: "svc", created: JAN_2026,
      tier: "premium", aliases: ["vega"], preview: false,
      contextWindow: 200000, maxOutput: 100000,
      capabilities: { tools: true, reasoning: true, vision: false, documents: false },
      pricing: { input: 1.1, output: 4.4, cachedInput: null },
      supportedParameters: REASONING_PARAMETERS, nativeWires: ["responses"],
      equivalents: ["svc-atlas-1"],
      placements: [sim("vega-a", 8, 250, 150)]
    },
    {
      id: "svc-nova-mini", displayName: "Nova Mini (simulated)", ownedBy: "svc", created: JAN_2026,
      tier: "workhorse", aliases: ["nova", "nova-mini"], preview: false,
      contextWindow: 128000, maxOutput: 16384,
      capabilities: { tools: true, reasoning: false, vision: true, documents: true },
      pricing: { input: 0.15, output: 0.6, cachedInput: 0.075 },
      supportedParameters: CHAT_PARAMETERS, nativeWires: ["chat_completions", "messages"],
      equivalents: ["svc-pico-1"],
      placements: [sim("nova-a", 32, 80, 250), sim("nova-b", 32, 90, 220)]
    },
    {
      id: "svc-pico-1", displayName: "Pico 1 (simulated)", ownedBy: "svc", created: JAN_2026,
      tier: "workhorse", aliases: ["pico"], preview: false,
      contextWindow: 32000, maxOutput: null,
      capabilities: { tools: true, reasoning: false, vision: false, documents: false },
      pricing: { input: 0.05, output: 0.2, cachedInput: null },
      supportedParameters: ["messages", "system", "max_tokens", "temperature", "stop", "stream", "tools", "tool_choice"],
      nativeWires: ["chat_completions"],
      equivalents: ["svc-nova-mini"],
      placements: [sim("pico-a", 64, 40, 400)]
    },
    {
      id: "svc-atlas-2-preview", displayName: "Atlas 2 Preview (simulated)", ownedBy: "svc", created: JAN_2026,
      tier: "frontier", aliases: ["atlas-next"], preview: true,
      contextWindow: 200000, maxOutput: 64000,
      capabilities: { tools: true, reasoning: true, vision: true, documents: true },
      pricing: { input: 4.0, output: 20.0, cachedInput: 0.4 },
      supportedParameters: REASONING_PARAMETERS, nativeWires: ["messages", "responses"],
      equivalents: ["svc-atlas-1"],
      placements: [sim("atlas-next-a", 4, 300, 80)]
    }
  ],
  embeddingModels: [
    { id: "svc-embed-mini", displayName: "Embed Mini (simulated)", dimensions: 384, pricing: { input: 0.01 }, placements: [sim("embed-mini-a", 32, 5, 0)] },
    { id: "svc-embed-lite", displayName: "Embed Lite (simulated)", dimensions: 512, pricing: { input: 0.015 }, placements: [sim("embed-lite-a", 32, 5, 0)] },
    { id: "svc-embed-base", displayName: "Embed Base (simulated)", dimensions: 768, pricing: { input: 0.02 }, placements: [sim("embed-base-a", 16, 8, 0)] },
    { id: "svc-embed-code", displayName: "Embed Code (simulated)", dimensions: 1024, pricing: { input: 0.03 }, placements: [sim("embed-code-a", 16, 8, 0)] },
    { id: "svc-embed-multilingual", displayName: "Embed Multilingual (simulated)", dimensions: 1024, pricing: { input: 0.03 }, placements: [sim("embed-multi-a", 16, 8, 0)] },
    { id: "svc-embed-small", displayName: "Embed Small (simulated)", dimensions: 1536, flexibleDimensions: true, pricing: { input: 0.02 }, placements: [sim("embed-small-a", 16, 10, 0)] },
    { id: "svc-embed-large", displayName: "Embed Large (simulated)", dimensions: 2048, flexibleDimensions: true, pricing: { input: 0.13 }, placements: [sim("embed-large-a", 8, 15, 0)] }
  ],
  compatibilityHandles: {
    "gpt-4o": "svc-lyra-3",
    "gpt-4o-mini": "svc-nova-mini",
    "gpt-4.1": "svc-atlas-1",
    "gpt-4.1-mini": "svc-nova-mini",
    "gpt-4.1-nano": "svc-pico-1",
    "o3": "svc-orion-2",
    "o4-mini": "svc-vega-2",
    "gpt-3.5-turbo-instruct": "svc-pico-1",
    "claude-opus-4-1": "svc-orion-2",
    "claude-sonnet-4-5": "svc-atlas-1",
    "claude-haiku-4-5": "svc-nova-mini",
    "claude-3-5-haiku-latest": "svc-nova-mini",
    "text-embedding-3-small": "svc-embed-small",
    "text-embedding-3-large": "svc-embed-large",
    "text-embedding-ada-002": "svc-embed-small"
  },
  plans: {
    free: { allowanceUsd: 5, rpm: 60, tpm: 1000000, concurrency: 8 },
    pro: { allowanceUsd: 100, rpm: 600, tpm: 2000000, concurrency: 64 },
    prepaid: { allowanceUsd: 0, rpm: 600, tpm: 2000000, concurrency: 64, prepaid: true }
  },
  defaultPlan: "free"
}
