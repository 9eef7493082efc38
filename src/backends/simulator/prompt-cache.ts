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
import { pausesAt, runInSlices, type Sliced, slicedMap } from "../../util/slices.ts"
import { isLarge, jsonTextPiecesInSlices } from "../../util/sliced-stringify.ts"
import { hashParts } from "./prng.ts"

export const PROMPT_CACHE_MIN_TOKENS = 1024

/** A prefix of the prompt: its hash and how many tokens it holds. */
export interface PromptPrefix {
  readonly hash: number
  readonly tokens: number
}

/** JSON of the parts of a request the simulator hashes, each serialized once, as the pieces of its text. */
export interface PromptJson {
  readonly system: ReadonlyArray<string>
  readonly tools: ReadonlyArray<string>
  readonly responseFormat: ReadonlyArray<string>
  readonly messages: ReadonlyArray<ReadonlyArray<string>>
}

/**
 * The messages one at a time, in slices: a request may hold tens of thousands of them. A large part
 * (a message or tool of megabytes) is serialized in slices of its own: `JSON.stringify` of a 6 MB
 * message held the event loop ~50 ms on a slow VM.
 */
export const promptJson = Effect.fnUntraced(function*(request: CanonicalRequest): Effect.fn.Return<PromptJson> {
  // A generator made once, not per request (`test/runtime-http/generator-closures.test.ts`).
  const small = yield* runInSlices(slicedMap(request.messages, smallMessageJson))
  return {
    system: yield* jsonTextPiecesInSlices(request.system),
    tools: yield* jsonTextPiecesInSlices(request.tools),
    responseFormat: yield* jsonTextPiecesInSlices(request.responseFormat),
    // Most requests have no large message: their list is taken as it is.
    messages: small.includes(undefined)
      ? yield* Effect.forEach(small, (pieces, i) => pieces === undefined ? jsonTextPiecesInSlices(request.messages[i]) : Effect.succeed(pieces))
      : small as ReadonlyArray<ReadonlyArray<string>>
  }
})

/** A small message's JSON as one piece; a large one is left for `jsonTextPiecesInSlices`. */
const smallMessageJson = (message: unknown): ReadonlyArray<string> | undefined => isLarge(message) ? undefined : [JSON.stringify(message)]

/**
 * The message-aligned prefixes of a request, shortest first; the last one is the whole prompt.
 * Tokens are exact (one job for the tokenizer thread); hashes are computed in slices.
 */
export const promptPrefixes = Effect.fnUntraced(function*(request: CanonicalRequest, given?: PromptJson): Effect.fn.Return<Array<PromptPrefix>> {
  const json = given ?? (yield* promptJson(request))
  const [preamble, ...messages] = yield* countPartTokens(yield* promptParts(request))
  // The preamble's hash is that of JSON.stringify([system, tools, responseFormat]).
  let hash = yield* hashParts(["[", ...json.system, ",", ...json.tools, ",", ...json.responseFormat, "]"])
  let tokens = preamble
  const prefixes: Array<PromptPrefix> = [{ hash, tokens }]
  for (let i = 0; i < json.messages.length; i++) {
    hash = yield* hashParts(json.messages[i], hash)
    tokens += messages[i]
    prefixes.push({ hash, tokens })
  }
  return prefixes
})

export interface PromptCache {
  /**
   * Tokens read from the cache for this prompt, then remembers its prefixes: a pass over every
   * message-aligned prefix, in slices (15,000 messages held the event loop ~150 ms on a slow VM,
   * a whole pass in one turn).
   */
  readAndStore(scope: string, prefixes: ReadonlyArray<PromptPrefix>): Effect.Effect<number>
}

export const makePromptCache = (capacity: number): PromptCache => {
  const entries = new Map<string, true>()
  const touch = (key: string) => {
    entries.delete(key)
    entries.set(key, true)
    if (entries.size > capacity) entries.delete(entries.keys().next().value as string)
  }
  function* readAndStoreSteps(scope: string, prefixes: ReadonlyArray<PromptPrefix>): Sliced<number> {
    let cached = 0
    for (let i = 0; i < prefixes.length; i++) {
      const prefix = prefixes[i]
      if (prefix.tokens >= PROMPT_CACHE_MIN_TOKENS) {
        const key = `${scope}\u0000${prefix.hash}`
        if (entries.has(key)) cached = prefix.tokens
        touch(key)
      }
      if (pausesAt(i)) yield
    }
    return cached
  }
  return {
    readAndStore: (scope, prefixes) => runInSlices(readAndStoreSteps(scope, prefixes))
  }
}
