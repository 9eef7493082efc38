/** The legacy completions dialect (`POST /v1/completions`, OpenAI shape): prompt in, text out. */
import { randomBase62 } from "../../util/ids.ts"
import type { ChatDialect } from "../dialect.ts"
import type { CompletionsEcho } from "./decode.ts"
import { decodeCompletionsRequest } from "./decode.ts"
import { encodeCompletionsBody, makeCompletionsStreamEncoder } from "./encode.ts"

export type { CompletionsEcho } from "./decode.ts"

export const completionsDialect: ChatDialect<CompletionsEcho> = {
  surface: "completions",
  newId: () => `cmpl-${randomBase62(18)}`,
  decode: decodeCompletionsRequest,
  defaultEcho: () => ({ includeUsage: false }),
  encodeResponse: encodeCompletionsBody,
  streamEncoder: makeCompletionsStreamEncoder
}
