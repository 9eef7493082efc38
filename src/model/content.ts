/**
 * Canonical content: the blocks and messages every dialect translates to and from.
 *
 * The set is a superset of what the Messages dialect (content blocks) and the Responses dialect
 * (typed items) can say, so a thinking signature, a tool call id or an error flag on a tool result
 * survives a trip through any other dialect. Field names are camelCase; dialects map wire names.
 */
import type { Json } from "../util/json.ts"


/** Where the bytes of an image come from. `mediaType` is e.g. `image/png`. */
type ImageSource =
  | { readonly kind: "base64"; readonly mediaType: string; readonly data: string }
  | { readonly kind: "url"; readonly url: string; readonly mediaType?: string }

/**
 * Where a document comes from: a PDF as base64 or by URL, or plain text (Messages' `text` source;
 * Responses' `input_file` with text content).
 */
type DocumentSource =
  | { readonly kind: "base64"; readonly mediaType: string; readonly data: string }
  | { readonly kind: "url"; readonly url: string; readonly mediaType?: string }
  | { readonly kind: "text"; readonly mediaType: string; readonly text: string }

export interface TextBlock {
  readonly type: "text"
  readonly text: string
}

export interface ImageBlock {
  readonly type: "image"
  readonly source: ImageSource
}

export interface DocumentBlock {
  readonly type: "document"
  readonly source: DocumentSource
  /** Optional title / file name, carried through when a dialect has a place for it. */
  readonly title?: string
}

/** A call the assistant made. `id` links it to the `ToolResultBlock` that answers it. */
interface ToolUseBlock {
  readonly type: "tool_use"
  readonly id: string
  readonly name: string
  /** The arguments; normally an object (Chat and Responses send them as a JSON string on the wire). */
  readonly input: Json
}

/** What a tool returned, sent back in a user turn. */
export interface ToolResultBlock {
  readonly type: "tool_result"
  readonly toolUseId: string
  readonly content: string | ReadonlyArray<TextBlock | ImageBlock | DocumentBlock>
  readonly isError: boolean
}

/** Visible reasoning. The signature must be sent back verbatim on later turns (Messages rule). */
interface ThinkingBlock {
  readonly type: "thinking"
  readonly thinking: string
  readonly signature: string
}

/** Reasoning the upstream returned encrypted; opaque, passed back as-is. */
interface RedactedThinkingBlock {
  readonly type: "redacted_thinking"
  readonly data: string
}

export type ContentBlock =
  | TextBlock
  | ImageBlock
  | DocumentBlock
  | ToolUseBlock
  | ToolResultBlock
  | ThinkingBlock
  | RedactedThinkingBlock

/** The blocks a model can produce (what a response or a streamed block can hold). */
export type OutputBlock = TextBlock | ThinkingBlock | RedactedThinkingBlock | ToolUseBlock

/**
 * One turn. There is no `system` or `tool` role: system text lives on the request, and tool
 * results are `tool_result` blocks inside a user turn (Chat's `role: tool` messages map there).
 */
export interface Message {
  readonly role: "user" | "assistant"
  readonly content: ReadonlyArray<ContentBlock>
}

// ---------------------------------------------------------------------------------------------
// Small constructors and readers, so callers do not spell object literals everywhere.

export const textBlock = (text: string): TextBlock => ({ type: "text", text })

export const userMessage = (content: string | ReadonlyArray<ContentBlock>): Message => ({
  role: "user",
  content: typeof content === "string" ? [textBlock(content)] : content
})

export const assistantMessage = (content: string | ReadonlyArray<ContentBlock>): Message => ({
  role: "assistant",
  content: typeof content === "string" ? [textBlock(content)] : content
})

/** The text blocks of a list, concatenated (no separator, as the Responses `output_text` does). */
export const joinText = (blocks: ReadonlyArray<ContentBlock>): string => {
  let out = ""
  for (const block of blocks) if (block.type === "text") out += block.text
  return out
}

/** The text of a tool result, whichever form its content takes (non-text parts are skipped). */
export const toolResultText = (block: ToolResultBlock): string =>
  typeof block.content === "string" ? block.content : joinText(block.content)
