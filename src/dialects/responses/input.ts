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
 */
import type { ContentBlock, DocumentBlock, ImageBlock, JsonValue, Message, TextBlock } from "../../model/content.ts"
import { textBlock } from "../../model/content.ts"
import { FieldError, isObject, MissingItem, object, type Obj, optionalString, string } from "./field-error.ts"

/** The stored wire item with this id, among the caller's items; undefined when there is none. */
export type ItemResolver = (id: string) => unknown

/** Without storage (the embedding API) no reference resolves. */
export const noStoredItems: ItemResolver = () => undefined

/** An input item that only names a stored item: `{type: "item_reference", id}` or a bare `{id}`. */
export const isItemReference = (raw: unknown): raw is Obj =>
  isObject(raw) && (raw.type === "item_reference" || (raw.type === undefined && raw.role === undefined && raw.id !== undefined))

/** The ids an `input` refers to, for the route to look up before decoding. */
export const referencedItemIds = (input: unknown): ReadonlyArray<string> =>
  Array.isArray(input)
    ? [...new Set(input.filter(isItemReference).map((item) => item.id).filter((id): id is string => typeof id === "string"))]
    : []

/** The stored item a reference stands for; a missing one is a 404 naming only its id. */
export const resolveReference = (item: Obj, path: string, resolve: ItemResolver): unknown => {
  const id = string(item, "id", path)
  const stored = resolve(id)
  if (stored === undefined) throw new MissingItem(id)
  return stored
}

export interface DecodedInput {
  readonly system: ReadonlyArray<TextBlock>
  readonly messages: ReadonlyArray<Message>
}

type Kind = "message" | "call" | "result" | "reasoning"
type Piece =
  | { readonly role: "system"; readonly blocks: ReadonlyArray<TextBlock> }
  | { readonly role: "user" | "assistant"; readonly kind: Kind; readonly blocks: ReadonlyArray<ContentBlock> }

export const decodeInput = (input: string | ReadonlyArray<unknown>, resolve: ItemResolver = noStoredItems): DecodedInput => {
  if (typeof input === "string") return { system: [], messages: [{ role: "user", content: [textBlock(input)] }] }
  const system: Array<TextBlock> = []
  const turns: Array<{ role: "user" | "assistant"; kind: Kind; content: Array<ContentBlock> }> = []
  input.forEach((raw, i) => {
    const path = `input[${i}]`
    const piece = decodeItem(isItemReference(raw) ? resolveReference(raw, path, resolve) : raw, path)
    if (piece === undefined) return
    if (piece.role === "system") {
      system.push(...piece.blocks)
      return
    }
    const last = turns.at(-1)
    if (last !== undefined && last.role === piece.role && !(last.kind === "message" && piece.kind === "message")) {
      last.content.push(...piece.blocks)
      last.kind = piece.kind
    } else {
      turns.push({ role: piece.role, kind: piece.kind, content: [...piece.blocks] })
    }
  })
  return { system, messages: turns.map(({ role, content }) => ({ role, content })) }
}

const decodeItem = (raw: unknown, path: string): Piece | undefined => {
  const item = object(raw, path)
  const type = item.type ?? "message"
  switch (type) {
    case "message":
      return decodeMessage(item, path)
    case "function_call": {
      const args = string(item, "arguments", path)
      return {
        role: "assistant",
        kind: "call",
        blocks: [{ type: "tool_use", id: string(item, "call_id", path), name: string(item, "name", path), input: parseArguments(args, `${path}.arguments`) }]
      }
    }
    case "function_call_output":
      return { role: "user", kind: "result", blocks: [decodeToolOutput(item, path)] }
    case "reasoning":
      return decodeReasoning(item, path)
    default:
      throw new FieldError(`${path}.type`, `unsupported input item type ${JSON.stringify(type)}`)
  }
}

const ROLES = ["user", "assistant", "system", "developer"]

const decodeMessage = (item: Obj, path: string): Piece => {
  const role = item.role
  if (typeof role !== "string" || !ROLES.includes(role)) {
    throw new FieldError(`${path}.role`, `expected one of ${ROLES.map((r) => `"${r}"`).join(", ")}`)
  }
  const content = item.content
  let blocks: Array<ContentBlock>
  if (typeof content === "string") blocks = [textBlock(content)]
  else if (Array.isArray(content)) blocks = content.map((part, j) => decodePart(part, `${path}.content[${j}]`, role))
  else throw new FieldError(`${path}.content`, "expected a string or an array of content parts")
  if (blocks.length === 0) throw new FieldError(`${path}.content`, "must not be empty")
  if (role === "system" || role === "developer") return { role: "system", blocks: blocks as Array<TextBlock> }
  return { role: role as "user" | "assistant", kind: "message", blocks }
}

/** One content part. Only user turns (and tool outputs) may carry images and files. */
const decodePart = (raw: unknown, path: string, role: string): TextBlock | ImageBlock | DocumentBlock => {
  const part = object(raw, path)
  switch (part.type) {
    case "input_text":
    case "output_text":
      return textBlock(string(part, "text", path))
    case "refusal":
      if (role === "assistant") return textBlock(string(part, "refusal", path))
      break
    case "input_image":
      if (role === "user") return decodeImage(part, path)
      break
    case "input_file":
      if (role === "user") return decodeFile(part, path)
      break
    default:
      throw new FieldError(`${path}.type`, `unsupported content part type ${JSON.stringify(part.type)}`)
  }
  throw new FieldError(`${path}.type`, `a ${role} message cannot hold ${JSON.stringify(part.type)} parts`)
}

const DATA_URL = /^data:([^;,]+)(?:;[^,]*)?;base64,(.*)$/s

const decodeImage = (part: Obj, path: string): ImageBlock => {
  const url = optionalString(part, "image_url", path)
  if (url === undefined) {
    if (part.file_id !== undefined && part.file_id !== null) {
      throw new FieldError(`${path}.file_id`, "file ids are not supported; send the image as image_url (a data: URL or an http(s) URL)")
    }
    throw new FieldError(`${path}.image_url`, "is required")
  }
  const data = DATA_URL.exec(url)
  if (data !== null) return { type: "image", source: { kind: "base64", mediaType: data[1], data: data[2] } }
  if (/^https?:\/\//i.test(url)) return { type: "image", source: { kind: "url", url } }
  throw new FieldError(`${path}.image_url`, "expected a base64 data: URL or an http(s) URL")
}

/** `file_data` is a data: URL (or bare base64, taken as a PDF); `file_url` a link to a PDF. */
const decodeFile = (part: Obj, path: string): DocumentBlock => {
  const title = optionalString(part, "filename", path)
  const titled = (block: DocumentBlock): DocumentBlock => (title === undefined ? block : { ...block, title })
  const fileData = optionalString(part, "file_data", path)
  if (fileData !== undefined) {
    const data = DATA_URL.exec(fileData)
    const mediaType = data?.[1] ?? "application/pdf"
    const base64 = data?.[2] ?? fileData
    if (mediaType === "application/pdf") return titled({ type: "document", source: { kind: "base64", mediaType, data: base64 } })
    if (mediaType.startsWith("text/")) {
      return titled({ type: "document", source: { kind: "text", mediaType, text: Buffer.from(base64, "base64").toString("utf8") } })
    }
    throw new FieldError(`${path}.file_data`, `only PDF and text files are supported, not ${mediaType}`)
  }
  const fileUrl = optionalString(part, "file_url", path)
  if (fileUrl !== undefined) return titled({ type: "document", source: { kind: "url", url: fileUrl } })
  if (part.file_id !== undefined && part.file_id !== null) {
    throw new FieldError(`${path}.file_id`, "file ids are not supported; send the file as file_data (a base64 data: URL)")
  }
  throw new FieldError(`${path}.file_data`, "is required")
}

const parseArguments = (json: string, path: string): JsonValue => {
  if (json.trim() === "") return {}
  try {
    return JSON.parse(json) as JsonValue
  } catch {
    throw new FieldError(path, "is not valid JSON")
  }
}

const decodeToolOutput = (item: Obj, path: string): ContentBlock => {
  const toolUseId = string(item, "call_id", path)
  const output = item.output
  if (typeof output === "string") return { type: "tool_result", toolUseId, content: output, isError: false }
  if (!Array.isArray(output)) throw new FieldError(`${path}.output`, "expected a string or an array of content parts")
  const content = output.map((part, j) => decodePart(part, `${path}.output[${j}]`, "user"))
  return { type: "tool_result", toolUseId, content, isError: false }
}

/**
 * A reasoning item sent back keeps its place only when it carries `encrypted_content` (our
 * thinking signature, or redacted data): an upstream accepts prior reasoning only with proof it
 * produced it, so a bare summary is dropped rather than forwarded as unverifiable thinking.
 */
const decodeReasoning = (item: Obj, path: string): Piece | undefined => {
  const encrypted = optionalString(item, "encrypted_content", path)
  const summary = item.summary ?? []
  if (!Array.isArray(summary)) throw new FieldError(`${path}.summary`, "expected an array")
  const text = summary.map((part, j) => {
    if (!isObject(part)) throw new FieldError(`${path}.summary[${j}]`, "expected an object")
    return string(part, "text", `${path}.summary[${j}]`)
  }).join("\n\n")
  if (encrypted === undefined) return undefined
  const block: ContentBlock = summary.length > 0
    ? { type: "thinking", thinking: text, signature: encrypted }
    : { type: "redacted_thinking", data: encrypted }
  return { role: "assistant", kind: "reasoning", blocks: [block] }
}
