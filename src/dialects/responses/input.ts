/**
 * `input` → canonical system + messages.
 *
 * A string is one user message. A list holds easy messages `{role, content}` (also typed
 * `type: "message"`), `function_call`, `function_call_output` and `reasoning` items. System and
 * developer messages become system text, in order. Items that belong to one canonical turn are
 * merged: an assistant message and the calls after it, tool results and the user text after them,
 * a reasoning item and the answer it led to. Two plain messages of the same role stay two turns.
 *
 * An `item_reference` (or a bare `{id}`, as the AI SDK sends reasoning items) stands for an item
 * of a stored response: the route looks the ids up (`referencedItemIds`) and passes a resolver,
 * and the stored item decodes exactly as if the client had sent it again.
 *
 * Decoded in stages (`../staged-decode.ts`): each item by its `type`, each content part by its
 * `type`; what a shape cannot say (which roles may hold which parts, refused file ids) is refused
 * here with the same 400.
 */
import { Schema } from "effect"
import { InvalidRequest, NotFound, shown } from "../../errors.ts"
import type { ContentBlock, DocumentBlock, ImageBlock, Message, TextBlock } from "../../model/content.ts"
import type { Json } from "../../util/json.ts"
import { textBlock } from "../../model/content.ts"
import { decoderAt, discriminated, given, opt, refuse } from "../staged-decode.ts"
import { pausesAt, type Sliced } from "../../util/slices.ts"
import { parseJsonTextInSteps } from "../../util/sliced-json.ts"
import { isBlank } from "../../util/long-strings.ts"
import { isPlainObject, type JsonObject } from "../../util/json.ts"

/** The stored wire item with this id, among the caller's items; undefined when there is none. */
export type ItemResolver = (id: string) => unknown

/** Without storage (the embedding API) no reference resolves. */
export const noStoredItems: ItemResolver = () => undefined

/** An input item that only names a stored item: `{type: "item_reference", id}` or a bare `{id}`. */
export const isItemReference = (raw: unknown): raw is JsonObject =>
  isPlainObject(raw) && (raw.type === "item_reference" || (raw.type === undefined && raw.role === undefined && raw.id !== undefined))

/** The ids an `input` refers to, for the route to look up before decoding. */
export const referencedItemIds = (input: unknown): ReadonlyArray<string> =>
  Array.isArray(input)
    ? [...new Set(input.filter(isItemReference).map((item) => item.id).filter((id): id is string => typeof id === "string"))]
    : []

const decodeReference = decoderAt(Schema.Struct({ id: Schema.String }))

/**
 * The stored item a reference stands for. A missing one is a 404 naming only its id (as OpenAI
 * answers it) when there are stored items to look in; without storage (`noStoredItems`, the
 * embedding API) it is a 400: references need the HTTP API.
 */
const resolveReference = (item: JsonObject, path: string, resolve: ItemResolver): unknown => {
  const { id } = decodeReference(item, path)
  const stored = resolve(id)
  if (stored !== undefined) return stored
  const message = `Item with id '${id}' not found.`
  if (resolve === noStoredItems) {
    throw new InvalidRequest({ message: `input: ${message} Item references need stored responses (the HTTP API); send the item itself`, param: "input" })
  }
  throw new NotFound({ kind: "chain", message, param: "input" })
}

const TextPart = Schema.Struct({ type: Schema.Literals(["input_text", "output_text"]), text: Schema.String })

const PartMembers = {
  input_text: TextPart,
  output_text: TextPart,
  refusal: Schema.Struct({ type: Schema.Literal("refusal"), refusal: Schema.String }),
  input_image: Schema.Struct({ type: Schema.Literal("input_image"), image_url: opt(Schema.String), file_id: Schema.optional(Schema.Unknown) }),
  input_file: Schema.Struct({
    type: Schema.Literal("input_file"),
    file_data: opt(Schema.String),
    file_url: opt(Schema.String),
    file_id: Schema.optional(Schema.Unknown),
    filename: opt(Schema.String)
  })
}
type Part = (typeof PartMembers)[keyof typeof PartMembers]["Type"]

const Role = Schema.Literals(["user", "assistant", "system", "developer"])
/** Content parts are decoded one by one; a list must hold at least one. */
const Content = Schema.Union([Schema.String, Schema.Array(Schema.Unknown).check(Schema.isMinLength(1))])

/** An easy message `{role, content}`: an item without a `type` (or with `type: null`). */
const EasyMessage = Schema.Struct({ role: Role, content: Content })

const ItemMembers = {
  message: Schema.Struct({ type: Schema.Literal("message"), role: Role, content: Content }),
  function_call: Schema.Struct({ type: Schema.Literal("function_call"), call_id: Schema.String, name: Schema.String, arguments: Schema.String }),
  function_call_output: Schema.Struct({
    type: Schema.Literal("function_call_output"),
    call_id: Schema.String,
    output: Schema.Union([Schema.String, Schema.Array(Schema.Unknown)])
  }),
  reasoning: Schema.Struct({
    type: Schema.Literal("reasoning"),
    encrypted_content: opt(Schema.String),
    summary: opt(Schema.Array(Schema.Struct({ text: Schema.String })))
  })
}

const decodeItemMember = discriminated("type", ItemMembers)
const decodeEasyMessage = decoderAt(EasyMessage)
const decodePartMember = discriminated("type", PartMembers)

export interface DecodedInput {
  readonly system: ReadonlyArray<TextBlock>
  readonly messages: ReadonlyArray<Message>
}

type Kind = "message" | "call" | "result" | "reasoning"
type Piece =
  | { readonly role: "system"; readonly blocks: ReadonlyArray<TextBlock> }
  | { readonly role: "user" | "assistant"; readonly kind: Kind; readonly blocks: ReadonlyArray<ContentBlock> }

/** The input's system text and turns (pausing every PAUSE_EVERY items: see staged-decode.ts). */
export function* decodeInput(input: string | ReadonlyArray<unknown>, resolve: ItemResolver = noStoredItems): Sliced<DecodedInput> {
  if (typeof input === "string") return { system: [], messages: [{ role: "user", content: [textBlock(input)] }] }
  const system: Array<TextBlock> = []
  const turns: Array<{ role: "user" | "assistant"; kind: Kind; content: Array<ContentBlock> }> = []
  for (let i = 0; i < input.length; i++) {
    if (i > 0 && pausesAt(i - 1)) yield
    const raw = input[i]
    const path = `input[${i}]`
    const piece = yield* decodeItem(isItemReference(raw) ? resolveReference(raw, path, resolve) : raw, path)
    if (piece === undefined) continue
    if (piece.role === "system") {
      system.push(...piece.blocks)
      continue
    }
    const last = turns.at(-1)
    if (last !== undefined && last.role === piece.role && !(last.kind === "message" && piece.kind === "message")) {
      last.content.push(...piece.blocks)
      last.kind = piece.kind
    } else {
      turns.push({ role: piece.role, kind: piece.kind, content: [...piece.blocks] })
    }
  }
  return { system, messages: turns.map(({ role, content }) => ({ role, content })) }
}

function* decodeItem(raw: unknown, path: string): Sliced<Piece | undefined> {
  if (isPlainObject(raw) && raw.type == null) return messagePiece(decodeEasyMessage(raw, path), path)
  const item = decodeItemMember(raw, path)
  switch (item.type) {
    case "message":
      return messagePiece(item, path)
    case "function_call":
      return {
        role: "assistant",
        kind: "call",
        blocks: [{ type: "tool_use", id: item.call_id, name: item.name, input: yield* parseArguments(item.arguments, `${path}.arguments`) }]
      }
    case "function_call_output": {
      const { call_id: toolUseId, output } = item
      const content = typeof output === "string" ? output : output.map((part, j) => decodePart(part, `${path}.output[${j}]`, "user"))
      return { role: "user", kind: "result", blocks: [{ type: "tool_result", toolUseId, content, isError: false }] }
    }
    case "reasoning":
      return reasoningPiece(item)
  }
}

const messagePiece = ({ role, content }: typeof EasyMessage.Type, path: string): Piece => {
  const blocks = typeof content === "string"
    ? [textBlock(content)]
    : content.map((part, j) => decodePart(part, `${path}.content[${j}]`, role))
  if (role === "system" || role === "developer") return { role: "system", blocks: blocks as Array<TextBlock> }
  return { role, kind: "message", blocks }
}

/** One content part. Only user turns (and tool outputs) may carry images and files. */
const decodePart = (raw: unknown, path: string, role: string): TextBlock | ImageBlock | DocumentBlock => {
  const part: Part = decodePartMember(raw, path)
  switch (part.type) {
    case "input_text":
    case "output_text":
      return textBlock(part.text)
    case "refusal":
      if (role === "assistant") return textBlock(part.refusal)
      break
    case "input_image":
      if (role === "user") return imageBlock(part, path)
      break
    case "input_file":
      if (role === "user") return documentBlock(part, path)
      break
  }
  return refuse(`${path}.type`, `a ${role} message cannot hold ${JSON.stringify(part.type)} parts`)
}

const DATA_URL = /^data:([^;,]+)(?:;[^,]*)?;base64,(.*)$/s

const imageBlock = (part: typeof PartMembers.input_image.Type, path: string): ImageBlock => {
  const url = given(part.image_url)
  if (url === undefined) {
    if (given(part.file_id) !== undefined) {
      return refuse(`${path}.file_id`, "file ids are not supported; send the image as image_url (a data: URL or an http(s) URL)")
    }
    return refuse(`${path}.image_url`, "is required")
  }
  const data = DATA_URL.exec(url)
  if (data !== null) return { type: "image", source: { kind: "base64", mediaType: data[1], data: data[2] } }
  if (/^https?:\/\//i.test(url)) return { type: "image", source: { kind: "url", url } }
  return refuse(`${path}.image_url`, "expected a base64 data: URL or an http(s) URL")
}

/** `file_data` is a data: URL (or bare base64, taken as a PDF); `file_url` a link to a PDF. */
const documentBlock = (part: typeof PartMembers.input_file.Type, path: string): DocumentBlock => {
  const title = given(part.filename)
  const titled = (block: DocumentBlock): DocumentBlock => (title === undefined ? block : { ...block, title })
  const fileData = given(part.file_data)
  if (fileData !== undefined) {
    const data = DATA_URL.exec(fileData)
    const mediaType = data?.[1] ?? "application/pdf"
    const base64 = data?.[2] ?? fileData
    if (mediaType === "application/pdf") return titled({ type: "document", source: { kind: "base64", mediaType, data: base64 } })
    if (mediaType.startsWith("text/")) {
      return titled({ type: "document", source: { kind: "text", mediaType, text: Buffer.from(base64, "base64").toString("utf8") } })
    }
    return refuse(`${path}.file_data`, `only PDF and text files are supported, not ${shown(mediaType)}`)
  }
  const fileUrl = given(part.file_url)
  if (fileUrl !== undefined) return titled({ type: "document", source: { kind: "url", url: fileUrl } })
  if (given(part.file_id) !== undefined) {
    return refuse(`${path}.file_id`, "file ids are not supported; send the file as file_data (a base64 data: URL)")
  }
  return refuse(`${path}.file_data`, "is required")
}

/**
 * A call's arguments, a JSON string on the wire; a long one parsed in steps the decode pauses
 * between; one nested deeper than the body may be is refused.
 */
function* parseArguments(json: string, path: string): Sliced<Json> {
  if (isBlank(json)) return {}
  const parsed = yield* parseJsonTextInSteps(json, path)
  return parsed === undefined ? refuse(path, "is not valid JSON") : parsed.value as Json
}

/**
 * A reasoning item sent back keeps its place only when it carries `encrypted_content` (our
 * thinking signature, or redacted data): an upstream accepts prior reasoning only with proof it
 * produced it, so a bare summary is dropped rather than forwarded as unverifiable thinking.
 */
const reasoningPiece = (item: typeof ItemMembers.reasoning.Type): Piece | undefined => {
  const encrypted = given(item.encrypted_content)
  if (encrypted === undefined) return undefined
  const summary = given(item.summary) ?? []
  const block: ContentBlock = summary.length > 0
    ? { type: "thinking", thinking: summary.map((part) => part.text).join("\n\n"), signature: encrypted }
    : { type: "redacted_thinking", data: encrypted }
  return { role: "assistant", kind: "reasoning", blocks: [block] }
}
