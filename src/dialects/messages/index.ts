/**
 * The Messages dialect (Anthropic Messages API shape): `POST /v1/messages` bodies in, message
 * envelopes or Messages SSE out. See `wire-schema.ts` (validation), `decode.ts` (wire → canonical),
 * `encode-body.ts` and `encode-stream.ts` (canonical → wire).
 */
import type { ChatDialect, Decoded } from "../dialect.ts"
import { decodeRequest, type Sliced } from "../staged-decode.ts"
import { countTokensRequestOf, messagesRequestOf } from "./decode.ts"
import { encodeMessage } from "./encode-body.ts"
import { makeMessagesStreamEncoder } from "./encode-stream.ts"


const BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

/** `msg_` and 24 random base-62 characters, the shape Messages ids have. */
const newMessageId = (): string => {
  const bytes = crypto.getRandomValues(new Uint8Array(24))
  let id = "msg_"
  for (const byte of bytes) id += BASE62[byte % 62]
  return id
}

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
