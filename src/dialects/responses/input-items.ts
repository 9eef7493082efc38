/**
 * Input items as `GET /v1/responses/{id}/input_items` lists them, and the ids that make them
 * referable later (`item_reference`).
 *
 * Each item of a request's `input` is listed in its full typed form: a string input is one user
 * message; an easy message `{role, content: "…"}` gets `type: "message"` and its text as an
 * `input_text` part (an assistant's as `output_text`); a reference is listed as the stored item it
 * stands for. An item the client sent without an id gets a new one (`msg_…`, `fc_…`, `fco_…`,
 * `rs_…`) and is indexed, so it can be referred to like an output item; an id the client sent is
 * kept as sent and not indexed again (it already names an item, or names nothing of ours).
 */
import { type ItemResolver, isItemReference } from "./input.ts"
import { isPlainObject, type Json, type JsonObject } from "../../util/json.ts"
import { randomBase62Chars } from "../../util/ids.ts"

export interface ListedInput {
  /** Every input item of this request, in order, as listed. */
  readonly items: ReadonlyArray<JsonObject>
  /** The items whose ids were minted here: they join the caller's referable items. */
  readonly minted: ReadonlyArray<JsonObject>
}

/** `msg_`, `fc_`… and 24 random base-62 characters, as the Responses API's item ids. */
const newItemId = (prefix: string) => `${prefix}_${randomBase62Chars(24)}`

const PREFIX: Record<string, string> = { message: "msg", function_call: "fc", function_call_output: "fco", reasoning: "rs" }

/** An easy message's string content as the typed part list. */
const contentParts = (role: Json | undefined, content: Json | undefined): Json =>
  typeof content === "string"
    ? [role === "assistant" ? { type: "output_text", text: content, annotations: [] } : { type: "input_text", text: content }]
    : content as Json // a decoded message always has its content

const typed = (item: JsonObject): JsonObject => {
  const type = typeof item.type === "string" ? item.type : "message"
  if (type !== "message") return { ...item, status: item.status ?? "completed" }
  return { ...item, type, content: contentParts(item.role, item.content), status: item.status ?? "completed" }
}

/**
 * The listing of a request's (already decoded, so well-formed) input. References resolve through
 * `resolve` to the stored items, which were decoded with this request.
 */
export const listInputItems = (input: string | ReadonlyArray<unknown>, resolve: ItemResolver): ListedInput => {
  if (typeof input === "string") {
    const item = { id: newItemId("msg"), type: "message", role: "user", content: [{ type: "input_text", text: input }], status: "completed" }
    return { items: [item], minted: [item] }
  }
  const items: Array<JsonObject> = []
  const minted: Array<JsonObject> = []
  for (const raw of input) {
    if (!isPlainObject(raw)) continue
    if (isItemReference(raw)) {
      const stored = resolve(raw.id as string)
      if (isPlainObject(stored)) items.push(stored)
      continue
    }
    const item = typed(raw)
    if (typeof item.id === "string" && item.id !== "") {
      items.push(item)
      continue
    }
    const { id: _absent, ...rest } = item
    const withId = { id: newItemId(PREFIX[item.type as string] ?? "item"), ...rest }
    items.push(withId)
    minted.push(withId)
  }
  return { items, minted }
}
