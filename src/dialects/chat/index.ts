/**
 * The Chat Completions dialect (`POST /v1/chat/completions`, OpenAI shape):
 * `decode.ts` (wire → canonical), `encode-body.ts` (one JSON body), `encode-stream.ts` (SSE).
 */
import { randomBase62 } from "../../util/ids.ts"
import type { ChatDialect } from "../dialect.ts"
import type { ChatEcho } from "./decode.ts"
import { decodeChatRequest } from "./decode.ts"
import { encodeChatBody } from "./encode-body.ts"
import { makeChatStreamEncoder } from "./encode-stream.ts"

export type { ChatEcho } from "./decode.ts"

/** `chatcmpl-` + 24 random base62-ish characters, like OpenAI's ids. */
const newChatId = () => `chatcmpl-${randomBase62(18)}`

export const chatDialect: ChatDialect<ChatEcho> = {
  surface: "chat",
  newId: newChatId,
  decode: decodeChatRequest,
  defaultEcho: () => ({ includeUsage: false }),
  encodeResponse: encodeChatBody,
  streamEncoder: makeChatStreamEncoder
}
