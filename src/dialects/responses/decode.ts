/**
 * The Responses request body → canonical request, plus what the envelope echoes back.
 *
 * Decoded in stages (`../staged-decode.ts`): the envelope's scalars here, then the typed members
 * (input items, tools, tool_choice, text.format) one by one in `input.ts` and `options.ts`, which
 * the envelope keeps as sent (the response echoes them). Fields the gateway has no use for
 * (`include`, `truncation`, `service_tier`, …) are accepted and ignored.
 */
import { Effect, Schema } from "effect"
import { InvalidRequest, NotFound } from "../../errors.ts"
import type { Json } from "../../util/json.ts"
import { textBlock } from "../../model/content.ts"
import { type CanonicalRequest, makeRequest, type ReasoningEffort, type ReasoningSettings } from "../../model/request.ts"
import type { Decoded } from "../dialect.ts"
import { OpenAiMetadata } from "../chat/wire-decode.ts"
import { decodeRequest, decoderAt, opt, refuse, runDecode } from "../staged-decode.ts"
import type { Sliced } from "../../util/slices.ts"
import { decodeInput, type ItemResolver, noStoredItems } from "./input.ts"
import { decodeFormat, decodeToolChoice, decodeTools } from "./options.ts"

const Effort = Schema.Literals(["none", "minimal", "low", "medium", "high", "xhigh"])

const Body = Schema.Struct({
  model: Schema.String,
  input: Schema.Union([Schema.String, Schema.Array(Schema.Unknown)]),
  instructions: opt(Schema.String),
  max_output_tokens: opt(Schema.Int.check(Schema.isGreaterThan(0))),
  temperature: opt(Schema.Number.check(Schema.isBetween({ minimum: 0, maximum: 2 }))),
  top_p: opt(Schema.Number.check(Schema.isBetween({ minimum: 0, maximum: 1 }))),
  tools: opt(Schema.Array(Schema.Unknown)),
  tool_choice: opt(Schema.Unknown),
  parallel_tool_calls: opt(Schema.Boolean),
  stream: opt(Schema.Boolean),
  reasoning: opt(Schema.Struct({
    effort: opt(Effort),
    summary: opt(Schema.Literals(["auto", "concise", "detailed"]))
  })),
  text: opt(Schema.Struct({ format: opt(Schema.Unknown), verbosity: opt(Schema.Literals(["low", "medium", "high"])) })),
  store: opt(Schema.Boolean),
  previous_response_id: opt(Schema.String),
  prompt_cache_key: opt(Schema.String),
  safety_identifier: opt(Schema.String),
  user: opt(Schema.String),
  metadata: opt(OpenAiMetadata)
})
type Body = typeof Body.Type

/** What the envelope repeats back: the request's own values, as sent or with their defaults. */
export interface ResponsesEcho {
  readonly instructions: string | null
  readonly tools: ReadonlyArray<Json>
  readonly toolChoice: Json
  readonly parallelToolCalls: boolean
  readonly temperature: number | null
  readonly topP: number | null
  readonly maxOutputTokens: number | null
  readonly previousResponseId: string | null
  readonly store: boolean
  readonly text: Json
  readonly reasoning: { readonly effort: string | null; readonly summary: string | null } | null
  readonly promptCacheKey: string | null
  readonly safetyIdentifier: string | null
  readonly user: string | null
  readonly metadata: Readonly<Record<string, string>>
}

const decodeBody = decoderAt(Body)

/**
 * Decodes a body whose `item_reference`s resolve through `resolve` (the caller's stored items);
 * a reference to no such item is a 404 `invalid_request_error` naming only its id, as OpenAI
 * answers it.
 */
export const decodeWithItems = (raw: unknown, resolve: ItemResolver): Effect.Effect<Decoded<ResponsesEcho>, InvalidRequest | NotFound> =>
  runDecode(raw, () => translate(decodeBody(raw, ""), resolve), isRefusal)

const isRefusal = (error: unknown): error is InvalidRequest | NotFound => error instanceof InvalidRequest || error instanceof NotFound

/** The dialect's own decode, with no stored items: a reference is a 400 naming its field. */
export const decode = decodeRequest((raw) => translate(decodeBody(raw, ""), noStoredItems))

/**
 * Canonical effort for a wire effort. `none` turns reasoning off; `xhigh` is our `high`. Any
 * `reasoning` object opts into visible reasoning (spec: "Opts into visible reasoning").
 */
const reasoningSettings = (reasoning: Body["reasoning"]): ReasoningSettings => {
  if (reasoning === undefined || reasoning === null) return { enabled: false, visible: false }
  const effort = reasoning.effort ?? undefined
  if (effort === "none") return { enabled: false, visible: false }
  const canonical: ReasoningEffort | undefined = effort === "xhigh" ? "high" : effort
  return { enabled: true, visible: true, ...(canonical === undefined ? {} : { effort: canonical }) }
}

function* translate(body: Body, resolve: ItemResolver): Sliced<Decoded<ResponsesEcho>> {
  if (Array.isArray(body.input) && body.input.length === 0 && !body.previous_response_id) {
    refuse("input", "must hold at least one item")
  }
  const input = yield* decodeInput(body.input, resolve)
  const tools = decodeTools(body.tools ?? [])
  const instructions = body.instructions ?? null
  const cacheAffinity = body.prompt_cache_key ?? body.safety_identifier ?? body.user ?? undefined
  const request: CanonicalRequest = makeRequest({
    model: body.model,
    // Instructions first; conversation system messages after (chaining relies on this order).
    system: [...(instructions === null ? [] : [textBlock(instructions)]), ...input.system],
    messages: input.messages,
    tools,
    toolChoice: decodeToolChoice(body.tool_choice, tools),
    reasoning: reasoningSettings(body.reasoning),
    responseFormat: decodeFormat(body.text?.format),
    stream: body.stream ?? false,
    metadata: body.metadata ?? {},
    ...(body.parallel_tool_calls == null ? {} : { parallelToolCalls: body.parallel_tool_calls }),
    ...(body.max_output_tokens == null ? {} : { maxOutputTokens: body.max_output_tokens }),
    ...(body.temperature == null ? {} : { temperature: body.temperature }),
    ...(body.top_p == null ? {} : { topP: body.top_p }),
    ...(cacheAffinity === undefined ? {} : { cacheAffinity }),
    ...(body.user == null ? {} : { user: body.user })
  })
  const echo: ResponsesEcho = {
    instructions,
    tools: (body.tools ?? []) as ReadonlyArray<Json>,
    toolChoice: (body.tool_choice ?? "auto") as Json,
    parallelToolCalls: body.parallel_tool_calls ?? true,
    temperature: body.temperature ?? null,
    topP: body.top_p ?? null,
    maxOutputTokens: body.max_output_tokens ?? null,
    previousResponseId: body.previous_response_id ?? null,
    // OpenAI's default, which clients rely on (the AI SDK omits `store` and refers to earlier
    // items by id); `store: false` keeps nothing (spec rule 2).
    store: body.store ?? true,
    text: { format: (body.text?.format ?? { type: "text" }) as Json, ...(body.text?.verbosity ? { verbosity: body.text.verbosity } : {}) },
    reasoning: body.reasoning == null ? null : { effort: body.reasoning.effort ?? null, summary: body.reasoning.summary ?? null },
    promptCacheKey: body.prompt_cache_key ?? null,
    safetyIdentifier: body.safety_identifier ?? null,
    user: body.user ?? null,
    metadata: body.metadata ?? {}
  }
  return { request, echo }
}

/** A canonical choice as the wire's `tool_choice`. */
const wireToolChoice = (choice: CanonicalRequest["toolChoice"]): Json =>
  choice.type === "any" ? "required" : choice.type === "tool" ? { type: "function", name: choice.name } : choice.type

/** A canonical format as the wire's `text.format`. */
const wireFormat = (format: CanonicalRequest["responseFormat"]): Json =>
  format.type === "json_schema"
    ? { type: "json_schema", name: format.name, schema: format.schema, strict: format.strict, ...(format.description === undefined ? {} : { description: format.description }) }
    : { type: format.type }

/**
 * The echo of a request decoded elsewhere (another dialect, or built by hand): its values in this
 * dialect's terms. Nothing is stored and nothing chains, so `store` is false.
 */
export const defaultEcho = (request: CanonicalRequest): ResponsesEcho => ({
  instructions: null,
  tools: request.tools.map((tool): Json => ({
    type: "function",
    name: tool.name,
    parameters: tool.inputSchema,
    strict: tool.strict ?? false,
    ...(tool.description === undefined ? {} : { description: tool.description })
  })),
  toolChoice: wireToolChoice(request.toolChoice),
  parallelToolCalls: request.parallelToolCalls ?? true,
  temperature: request.temperature ?? null,
  topP: request.topP ?? null,
  maxOutputTokens: request.maxOutputTokens ?? null,
  previousResponseId: null,
  store: false,
  text: { format: wireFormat(request.responseFormat) },
  reasoning: request.reasoning.visible ? { effort: request.reasoning.effort ?? null, summary: null } : null,
  promptCacheKey: null,
  safetyIdentifier: null,
  user: request.user ?? null,
  metadata: request.metadata
})
