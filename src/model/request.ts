/**
 * The canonical request: what every chat dialect (Messages, Chat Completions, Responses, legacy
 * completions) is translated into before routing, and what every backend consumes.
 *
 * Absent optional fields mean "the client did not say"; backends then use their own defaults.
 * Lists are always present (possibly empty) so readers never branch on `undefined`.
 */
import type { Message, TextBlock } from "./content.ts"
import type { JsonObject } from "../util/json.ts"

export interface ToolDefinition {
  readonly name: string
  readonly description?: string
  /** JSON Schema of the tool's input; an object schema in practice. */
  readonly inputSchema: JsonObject
  /** OpenAI `strict` function calling: arguments must match the schema exactly. */
  readonly strict?: boolean
}

/**
 * `auto`: the model decides. `any`: it must call some tool (Chat/Responses `required`).
 * `none`: it must not call tools. `tool`: it must call the named tool.
 */
export type ToolChoice =
  | { readonly type: "auto" }
  | { readonly type: "any" }
  | { readonly type: "none" }
  | { readonly type: "tool"; readonly name: string }

export type ReasoningEffort = "minimal" | "low" | "medium" | "high"

/**
 * `enabled`: a reasoning model reasons before answering (models without the capability ignore it).
 * `visible`: the reasoning is surfaced as thinking blocks; when false it stays hidden but its
 * tokens still count as output (usage.reasoningTokens) and against `maxOutputTokens`.
 */
export interface ReasoningSettings {
  readonly enabled: boolean
  readonly visible: boolean
  readonly effort?: ReasoningEffort
  /** Messages `thinking.budget_tokens`: an upper bound on reasoning tokens. */
  readonly budgetTokens?: number
}

export type ResponseFormat =
  | { readonly type: "text" }
  | { readonly type: "json_object" }
  | {
    readonly type: "json_schema"
    readonly name: string
    readonly schema: JsonObject
    readonly strict: boolean
    readonly description?: string
  }

export interface CanonicalRequest {
  /** The resolved canonical catalog id (`svc-…`), never an alias or compatibility handle. */
  readonly model: string
  /** System / developer instructions, in order. */
  readonly system: ReadonlyArray<TextBlock>
  readonly messages: ReadonlyArray<Message>
  readonly tools: ReadonlyArray<ToolDefinition>
  readonly toolChoice: ToolChoice
  /** Chat/Responses `parallel_tool_calls`; Messages `disable_parallel_tool_use` inverted. */
  readonly parallelToolCalls?: boolean
  /** Output ceiling; hidden reasoning counts against it. Absent: the model's own limit. */
  readonly maxOutputTokens?: number
  readonly temperature?: number
  readonly topP?: number
  /** Messages `top_k`. */
  readonly topK?: number
  /** Chat Completions `seed`. */
  readonly seed?: number
  readonly stopSequences: ReadonlyArray<string>
  readonly reasoning: ReasoningSettings
  readonly responseFormat: ResponseFormat
  /**
   * Conversation-stable identity for prompt-cache affinity: Responses `prompt_cache_key` (falling
   * back to `safety_identifier`, then `user`), Messages `metadata.user_id`.
   */
  readonly cacheAffinity?: string
  /** End-user id as sent by the client (Chat/Responses `user`). */
  readonly user?: string
  readonly stream: boolean
  /** Free-form string metadata (Chat/Responses `metadata`). */
  readonly metadata: Readonly<Record<string, string>>
}

/** The fields a request must name; everything else has a neutral default. */
export type CanonicalRequestInit =
  & Pick<CanonicalRequest, "model" | "messages">
  & Partial<Omit<CanonicalRequest, "model" | "messages">>

/** Fills the neutral defaults: no system, no tools, auto choice, no reasoning, text, not streaming. */
export const makeRequest = (init: CanonicalRequestInit): CanonicalRequest => ({
  system: [],
  tools: [],
  toolChoice: { type: "auto" },
  stopSequences: [],
  reasoning: { enabled: false, visible: false },
  responseFormat: { type: "text" },
  stream: false,
  metadata: {},
  ...init,
  // In an array of exactly its length: decoders build the list with `push`, and V8 gives such an
  // array 16 spare slots or more (~130 bytes), held for as long as a stream is open (its request
  // stays for the continuation and the usage estimate). `slice` copies pointers only.
  messages: init.messages.slice()
})

/** True when the request obliges the model to call a tool (`any` or a named tool). */
export const isToolCallForced = (request: CanonicalRequest): boolean =>
  request.tools.length > 0 && (request.toolChoice.type === "any" || request.toolChoice.type === "tool")
