/**
 * The surfaces a key may be allowed (`permissions.ts`): a plain list, importable without Effect
 * (`gateway --help` prints it without loading any of the gateway's modules: `cli/help.ts`).
 */
export const Surfaces = [
  "messages", "chat", "responses", "completions", "embeddings", "batches", "runs", "states", "artifacts"
] as const
export type Surface = typeof Surfaces[number]
