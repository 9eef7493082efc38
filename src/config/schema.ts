/**
 * The shape of the gateway's JSON config file (`GATEWAY_CONFIG`), validated with Schema at start.
 * Field names follow the example; new fields may be added, none of these removed.
 */
import { Schema } from "effect"

const NonNegative = Schema.Finite.check(Schema.isGreaterThanOrEqualTo(0))
const PositiveInt = Schema.Int.check(Schema.isGreaterThan(0))
const CatalogId = Schema.String.check(Schema.isPattern(/^svc-[a-z0-9][a-z0-9.-]*$/, {
  expected: "an id of the form svc-<lowercase letters, digits, dots, dashes>"
}))
const Name = Schema.String.check(Schema.isPattern(/^[A-Za-z0-9][A-Za-z0-9._:-]*$/, {
  expected: "a name of letters, digits, dots, dashes, colons and underscores"
}))
const Names = Schema.Array(Name)

const SimulatorSettings = Schema.Struct({
  /** Milliseconds before the first content token. */
  ttftMs: Schema.optional(NonNegative),
  /** Output pacing; 0 or absent emits as fast as possible. */
  tokensPerSecond: Schema.optional(NonNegative),
  /** Extra seed mixed into the deterministic generator. */
  seed: Schema.optional(Schema.Int)
})
export type SimulatorSettings = typeof SimulatorSettings.Type

const BackendKind = Schema.Literals(["simulator", "openai-compatible", "anthropic"])
export type BackendKind = typeof BackendKind.Type

export const Placement = Schema.Struct({
  id: Name,
  backend: BackendKind,
  /** Concurrent requests this placement serves; further requests wait in its queue. */
  capacity: PositiveInt,
  simulator: Schema.optional(SimulatorSettings),
  /** Upstream base URL (openai-compatible and anthropic backends). */
  baseUrl: Schema.optional(Schema.String.check(Schema.isPattern(/^https?:\/\/\S+$/, { expected: "an http(s) URL" }))),
  /** Name of the environment variable that holds the upstream API key (never the key itself). */
  apiKeyEnv: Schema.optional(Name),
  /** Model name the upstream expects; never shown to clients. */
  upstreamModel: Schema.optional(Schema.NonEmptyString)
})
export type Placement = typeof Placement.Type

const Capabilities = Schema.Struct({
  tools: Schema.Boolean,
  reasoning: Schema.Boolean,
  vision: Schema.Boolean,
  documents: Schema.Boolean
})
export type Capabilities = typeof Capabilities.Type

/** List rates in USD per million tokens. `cachedInput: null` means repeated context earns no discount. */
const ChatPricing = Schema.Struct({
  input: NonNegative,
  output: NonNegative,
  cachedInput: Schema.NullOr(NonNegative)
})
export type ChatPricing = typeof ChatPricing.Type

export const ChatModel = Schema.Struct({
  id: CatalogId,
  displayName: Schema.NonEmptyString,
  ownedBy: Schema.NonEmptyString,
  created: Schema.Int.check(Schema.isGreaterThanOrEqualTo(0)),
  tier: Schema.NonEmptyString,
  aliases: Schema.optional(Names),
  preview: Schema.optional(Schema.Boolean),
  contextWindow: PositiveInt,
  maxOutput: Schema.NullOr(PositiveInt),
  capabilities: Capabilities,
  pricing: ChatPricing,
  supportedParameters: Schema.Array(Schema.NonEmptyString),
  nativeWires: Schema.Array(Schema.NonEmptyString),
  equivalents: Schema.optional(Schema.Array(CatalogId)),
  placements: Schema.NonEmptyArray(Placement)
})
export type ChatModel = typeof ChatModel.Type

export const EmbeddingModel = Schema.Struct({
  id: CatalogId,
  displayName: Schema.optional(Schema.NonEmptyString),
  ownedBy: Schema.optional(Schema.NonEmptyString),
  created: Schema.optional(Schema.Int.check(Schema.isGreaterThanOrEqualTo(0))),
  aliases: Schema.optional(Names),
  dimensions: Schema.Int.check(Schema.isBetween({ minimum: 1, maximum: 8192 })),
  /** When true, callers may ask for fewer `dimensions` (a prefix of the vector, re-normalized). */
  flexibleDimensions: Schema.optional(Schema.Boolean),
  maxInputTokens: Schema.optional(PositiveInt),
  pricing: Schema.Struct({ input: NonNegative }),
  placements: Schema.NonEmptyArray(Placement)
})
export type EmbeddingModel = typeof EmbeddingModel.Type

export const Plan = Schema.Struct({
  /** Monthly included usage in USD at list rates (calendar month, UTC). */
  allowanceUsd: NonNegative,
  /** Requests per minute. */
  rpm: PositiveInt,
  /** Tokens per minute (input estimate + output ceiling). */
  tpm: PositiveInt,
  /** Requests in flight at once. */
  concurrency: PositiveInt,
  /** A prepaid plan spends purchased credits instead of a monthly allowance. */
  prepaid: Schema.optional(Schema.Boolean)
})
export type Plan = typeof Plan.Type

export const GatewayConfig = Schema.Struct({
  models: Schema.NonEmptyArray(ChatModel),
  embeddingModels: Schema.optional(Schema.Array(EmbeddingModel)),
  compatibilityHandles: Schema.optional(Schema.Record(Schema.String, CatalogId)),
  plans: Schema.Record(Name, Plan),
  defaultPlan: Name
})
export type GatewayConfig = typeof GatewayConfig.Type
