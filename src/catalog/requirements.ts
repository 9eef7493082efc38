/**
 * What a request demands of a model, checked before dispatch:
 * - content the model cannot read (images without `vision`, documents without `documents`) → 400;
 * - hard requirements no placement of the model can guarantee (a forced tool call, a strict JSON
 *   schema) → 422;
 * - an output ceiling above the model's published `maxOutput` → 400 — except on a request that
 *   named the model by a compatibility handle: a stock name promises the stock model's limits, and
 *   SDKs send that model's own maximum when the caller sets none (`@ai-sdk/anthropic` sends 64000
 *   for claude-sonnet-4-5), so the ceiling is clamped to the serving model's maximum instead.
 */
import { Effect } from "effect"
import type { ChatModel, Placement } from "../config/schema.ts"
import { InvalidRequest, Unprocessable } from "../errors.ts"
import type { Message } from "../model/content.ts"
import type { CanonicalRequest } from "../model/request.ts"
import { isToolCallForced } from "../model/request.ts"
import { pausesAt, runAtOnce, runInSlices, type Sliced } from "../util/slices.ts"

/** What one placement can guarantee, by backend. Anthropic's Messages API has no strict JSON schema mode. */
const placementGuarantees = (placement: Placement) => ({
  forcedToolChoice: true,
  strictJsonSchema: placement.backend !== "anthropic"
})

/** Whether a request's messages hold images or documents (which a model must be able to read). */
interface ContentKinds {
  readonly images: boolean
  readonly documents: boolean
}

function* contentKindsOf(messages: ReadonlyArray<Message>): Sliced<ContentKinds> {
  let images = false
  let documents = false
  for (let i = 0; i < messages.length; i++) {
    for (const block of messages[i].content) {
      const parts = block.type === "tool_result" && typeof block.content !== "string" ? block.content : [block]
      for (const part of parts) {
        if (part.type === "image") images = true
        if (part.type === "document") documents = true
      }
    }
    if (pausesAt(i)) yield
  }
  return { images, documents }
}

/**
 * Each message list's content kinds, once found: `prepareRequest` finds them in slices (a request
 * of 16,000 messages is milliseconds of walking), and the checks of the same request against a
 * model's equivalents (`model-caller.ts`, the same list under another model id) find them here.
 */
const kindsFound = new WeakMap<ReadonlyArray<Message>, ContentKinds>()

const contentKinds = (messages: ReadonlyArray<Message>): ContentKinds => {
  const found = kindsFound.get(messages)
  if (found !== undefined) return found
  const kinds = runAtOnce(contentKindsOf(messages))
  kindsFound.set(messages, kinds)
  return kinds
}

/** The first unmet requirement, as the error to answer with; undefined when the model can serve. */
export const unmetRequirement = (model: ChatModel, request: CanonicalRequest): InvalidRequest | Unprocessable | undefined => {
  const { images, documents } = contentKinds(request.messages)
  if (images && !model.capabilities.vision) {
    return new InvalidRequest({ message: `The model ${model.id} does not accept images (no vision capability)`, param: "messages" })
  }
  if (documents && !model.capabilities.documents) {
    return new InvalidRequest({ message: `The model ${model.id} does not accept documents (no documents capability)`, param: "messages" })
  }
  if (request.maxOutputTokens !== undefined && model.maxOutput !== null && request.maxOutputTokens > model.maxOutput) {
    return new InvalidRequest({
      message: `The output ceiling ${request.maxOutputTokens} is above the model's maximum of ${model.maxOutput} tokens`,
      param: "max_tokens"
    })
  }
  if (isToolCallForced(request) && !model.capabilities.tools) {
    return new Unprocessable({ message: `The model ${model.id} cannot guarantee a forced tool call`, param: "tool_choice" })
  }
  const strict = request.responseFormat.type === "json_schema" && request.responseFormat.strict
  if (strict && !model.placements.some((p) => placementGuarantees(p).strictJsonSchema)) {
    return new Unprocessable({ message: `The model ${model.id} cannot guarantee output matching a strict JSON schema`, param: "response_format" })
  }
  return undefined
}

export interface PrepareOptions {
  /** The client named the model by a compatibility handle: clamp the output ceiling, never refuse it. */
  readonly viaHandle?: boolean
}

/** The output ceiling as dispatched: a handle's request is clamped to the model's maximum. */
const ceilingFor = (model: ChatModel, requested: number | undefined, viaHandle: boolean) =>
  viaHandle && requested !== undefined && model.maxOutput !== null && requested > model.maxOutput ? model.maxOutput : requested

/**
 * The request as dispatched: the canonical model id, hidden reasoning on reasoning models that
 * were not asked to show it (it still counts against the ceiling), the output ceiling (clamped
 * for compatibility handles), and the model's requirements met.
 */
export const prepareRequest = (model: ChatModel, decoded: CanonicalRequest, options: PrepareOptions = {}) => {
  const reasoning = model.capabilities.reasoning && !decoded.reasoning.enabled
    ? { ...decoded.reasoning, enabled: true, visible: false }
    : decoded.reasoning
  const maxOutputTokens = ceilingFor(model, decoded.maxOutputTokens, options.viaHandle === true)
  const request: CanonicalRequest = {
    ...decoded,
    model: model.id,
    reasoning,
    ...(maxOutputTokens === undefined ? {} : { maxOutputTokens })
  }
  return Effect.flatMap(runInSlices(contentKindsOf(request.messages)), (kinds) => {
    kindsFound.set(request.messages, kinds)
    const unmet = unmetRequirement(model, request)
    return unmet === undefined ? Effect.succeed(request) : Effect.fail(unmet)
  })
}
