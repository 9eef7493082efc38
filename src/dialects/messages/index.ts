/**
 * The Messages dialect (Anthropic Messages API shape): `POST /v1/messages` bodies in, message
 * envelopes or Messages SSE out. See `wire-schema.ts` (validation), `decode.ts` (wire → canonical),
 * `encode-body.ts` and `encode-stream.ts` (canonical → wire).
 */
import type { ChatDialect, Decoded } from "../dialect.ts"
import { decodeRequest } from "../staged-decode.ts"
import type { Sliced } from "../../util/slices.ts"
import { countTokensRequestOf, messagesRequestOf } from "./decode.ts"
import { encodeMessage } from "./encode-body.ts"
import { makeMessagesStreamEncoder } from "./encode-stream.ts"
import { randomBase62Chars } from "../../util/ids.ts"


/** `msg_` and 24 random base-62 characters, the shape Messages ids have. */
const newMessageId = (): string => `msg_${randomBase62Chars(24)}`

/** Decodes a count_tokens body (no `max_tokens`) to the canonical request it would make. */
export const decodeCountTokens = decodeRequest(countTokensRequestOf)

/** Nothing to echo: the envelope is built from the canonical response and the context alone. */
export type MessagesEcho = undefined

function* messagesDecoded(body: unknown): Sliced<Decoded<MessagesEcho>> {
  return { request: yield* messagesRequestOf(body), echo: undefined }
}

export const messagesDialect: ChatDialect<MessagesEcho> = {
  surface: "messages",
  newId: newMessageId,
  decode: decodeRequest(messagesDecoded),
  defaultEcho: () => undefined,
  encodeResponse: encodeMessage,
  streamEncoder: makeMessagesStreamEncoder
}
