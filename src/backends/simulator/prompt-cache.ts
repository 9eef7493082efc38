/**
 * A simulated prompt cache, so `cachedInputTokens` behaves like an upstream's.
 *
 * A request's prompt is split at message boundaries into prefixes: the preamble (system, tools,
 * response schema), then the preamble plus the first message, plus the second, and so on. A
 * prefix is cached once a request containing it was served by the same placement under the same
 * cache-affinity key (`cacheAffinity`, or none). A later request reads from the cache the longest
 * of its prefixes that is cached and holds at least PROMPT_CACHE_MIN_TOKENS tokens (as upstream
 * providers require). Entries are kept in a bounded least-recently-used map.
 */
import { Effect } from "effect"
import type { CanonicalRequest } from "../../model/request.ts"
import { countPartTokens, promptParts } from "../../model/tokens.ts"
import { hashParts } from "./prng.ts"

export const PROMPT_CACHE_MIN_TOKENS = 1024

/** A prefix of the prompt: its hash and how many tokens it holds. */
export interface PromptPrefix {
  readonly hash: number
  readonly tokens: number
}

/** JSON of the parts of a request the simulator hashes, each serialized once. */
export interface PromptJson {
  readonly system: string
  readonly tools: string
  readonly responseFormat: string
  readonly messages: ReadonlyArray<string>
}

export const promptJson = (request: CanonicalRequest): PromptJson => ({
  system: JSON.stringify(request.system),
  tools: JSON.stringify(request.tools),
  responseFormat: JSON.stringify(request.responseFormat),
  messages: request.messages.map((message) => JSON.stringify(message))
})

/**
 * The message-aligned prefixes of a request, shortest first; the last one is the whole prompt.
 * Tokens are exact (one job for the tokenizer thread); hashes are computed in slices.
 */
export const promptPrefixes = (request: CanonicalRequest, json: PromptJson = promptJson(request)): Effect.Effect<Array<PromptPrefix>> =>
  Effect.gen(function*() {
    const [preamble, ...messages] = yield* countPartTokens(yield* promptParts(request))
    // The preamble's hash is that of JSON.stringify([system, tools, responseFormat]).
    let hash = yield* hashParts(["[", json.system, ",", json.tools, ",", json.responseFormat, "]"])
    let tokens = preamble
    const prefixes: Array<PromptPrefix> = [{ hash, tokens }]
    for (let i = 0; i < json.messages.length; i++) {
      hash = yield* hashParts([json.messages[i]], hash)
      tokens += messages[i]
      prefixes.push({ hash, tokens })
    }
    return prefixes
  })

export interface PromptCache {
  /** Tokens read from the cache for this prompt, then remembers its prefixes. */
  readAndStore(scope: string, prefixes: ReadonlyArray<PromptPrefix>): number
}

export const makePromptCache = (capacity: number): PromptCache => {
  const entries = new Map<string, true>()
  const touch = (key: string) => {
    entries.delete(key)
    entries.set(key, true)
    if (entries.size > capacity) entries.delete(entries.keys().next().value as string)
  }
  return {
    readAndStore(scope, prefixes) {
      let cached = 0
      for (const prefix of prefixes) {
        if (prefix.tokens < PROMPT_CACHE_MIN_TOKENS) continue
        const key = `${scope}\u0000${prefix.hash}`
        if (entries.has(key)) cached = prefix.tokens
        touch(key)
      }
      return cached
    }
  }
}
