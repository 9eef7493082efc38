/**
 * The conversation a stored response carries, so `previous_response_id` can continue it with
 * only the new input items.
 *
 * What carries over (OpenAI's semantics): every earlier input item and output, and system or
 * developer messages sent as input items. What does not: `instructions` — each request's own
 * instructions apply to that request only, as the official API documents.
 */
import type { Message, TextBlock } from "../model/content.ts"
import type { CanonicalResponse } from "../model/events.ts"
import type { CanonicalRequest } from "../model/request.ts"
import type { Decoded } from "../dialects/dialect.ts"
import { outputAsInput, type ResponsesEcho } from "../dialects/responses/index.ts"

export interface Transcript {
  /** System text from input items (never `instructions`). */
  readonly system: ReadonlyArray<TextBlock>
  readonly messages: ReadonlyArray<Message>
}

export const emptyTranscript: Transcript = { system: [], messages: [] }

/** A transcript as read back from storage (parsed by `ResponsesRepo.conversation`), or the empty one. */
export const readTranscript = (stored: unknown): Transcript => {
  const { system, messages } = (stored ?? {}) as Partial<Transcript>
  return { system: Array.isArray(system) ? system : [], messages: Array.isArray(messages) ? messages : [] }
}

/**
 * The request to dispatch — the previous conversation, then this request's input — and the
 * conversation so far without this turn's answer. `decode` puts `instructions` first in
 * `system`, which is how they are told apart from system messages here.
 */
export const continueConversation = (previous: Transcript, decoded: Decoded<ResponsesEcho>) => {
  const { request, echo } = decoded
  const instructions = echo.instructions === null ? [] : request.system.slice(0, 1)
  const inputSystem = request.system.slice(instructions.length)
  // `concat`, not spreads: it allocates exactly, where a spread leaves V8's spare slots (~130 bytes
  // a list) in arrays an open stream holds for as long as it lasts.
  const conversation: Transcript = {
    system: previous.system.concat(inputSystem),
    messages: previous.messages.concat(request.messages)
  }
  const continued: CanonicalRequest = {
    ...request,
    system: instructions.concat(conversation.system),
    messages: conversation.messages
  }
  return { request: continued, conversation }
}

/** The conversation including the answer, as the assistant turn a client would send back. */
export const withAnswer = (conversation: Transcript, response: CanonicalResponse): Transcript => {
  const content = outputAsInput(response.content)
  return content.length === 0 ? conversation : { ...conversation, messages: conversation.messages.concat([{ role: "assistant", content }]) }
}
