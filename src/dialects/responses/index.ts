/**
 * The Responses dialect (OpenAI `POST /v1/responses`): typed input items in, a Response object
 * with typed output items out, or the typed SSE sequence the `openai` SDK's `responses.stream()`
 * accumulates. Storage and chaining (`store`, `previous_response_id`) live in the route, not here.
 */
import type { ChatDialect } from "../dialect.ts"
import { decode, defaultEcho, type ResponsesEcho } from "./decode.ts"
import { encodeResponse } from "./envelope.ts"
import { newResponseId } from "./ids.ts"
import { makeResponsesStreamEncoder } from "./stream.ts"

export type { ResponsesEcho } from "./decode.ts"
export { outputAsInput } from "./envelope.ts"

export const responsesDialect: ChatDialect<ResponsesEcho> = {
  surface: "responses",
  newId: newResponseId,
  decode,
  defaultEcho,
  encodeResponse,
  streamEncoder: makeResponsesStreamEncoder
}
