/**
 * Ids of the Responses dialect. A response id is the time of minting and random characters (as
 * OpenAI's lead with a timestamp; it is a stored row's primary key, see util/ids.ts); the ids of
 * its output items are derived from it and the item's position, so the streamed items and the
 * final envelope (built later from the collected response by a pure function) name each item the
 * same way.
 */
import { timeOrderedBase62 } from "../../util/ids.ts"

export const newResponseId = (): string => `resp_${timeOrderedBase62(24)}`

export type ItemPrefix = "msg" | "rs" | "fc"

/** `msg_<response suffix>_<index>` and so on: stable for a given response and output position. */
export const itemId = (prefix: ItemPrefix, responseId: string, index: number): string =>
  `${prefix}_${responseId.startsWith("resp_") ? responseId.slice(5) : responseId}_${index}`

/**
 * The wire `call_id` of a canonical tool call. Canonical ids from other dialects (`toolu_…`) get
 * the `call_` shape clients of this dialect expect; ids that already have it pass unchanged, so a
 * call id a client sends back decodes to the same canonical id it came from.
 */
export const callId = (toolUseId: string): string =>
  toolUseId.startsWith("call_") ? toolUseId : `call_${toolUseId.replace(/^toolu_/, "")}`
