/**
 * The upload body's outer JSON: `bytes` or `content` becomes the content (its UTF-8 bytes and
 * their SHA-256); every other field goes back to the caller for validation. Pure; the upload runs
 * it in a worker for large bodies, because parsing 32 MiB of JSON takes tens of milliseconds.
 */
import { createHash } from "node:crypto"
import { isWellFormed } from "./values.ts"

export interface Envelope {
  /** The body's fields other than `bytes` and `content`. */
  readonly fields: Record<string, unknown>
  /** Which field carried the content (for error messages). */
  readonly contentField: "bytes" | "content"
  readonly text: string
  /** The parsed value of a non-string `content`. */
  readonly value: unknown
  readonly bytes: Uint8Array
  readonly sha256: string
}

export interface EnvelopeError {
  readonly param?: string | undefined
  readonly message: string
}

const decoder = new TextDecoder("utf-8", { fatal: true })

export const concatChunks = (chunks: ReadonlyArray<Uint8Array>): Uint8Array => {
  if (chunks.length === 1) return chunks[0]
  const out = new Uint8Array(chunks.reduce((n, c) => n + c.length, 0))
  let at = 0
  for (const chunk of chunks) {
    out.set(chunk, at)
    at += chunk.length
  }
  return out
}

export const readEnvelope = (body: Uint8Array): Envelope | EnvelopeError => {
  let text: string
  try {
    text = decoder.decode(body)
  } catch {
    return { message: "The request body is not valid UTF-8" }
  }
  if (text.trim() === "") return { message: "The request body is empty; a JSON object is required" }
  let parsed: unknown
  try {
    parsed = JSON.parse(text)
  } catch (error) {
    return { message: `Malformed JSON in the request body: ${(error as Error).message}` }
  }
  if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) {
    return { message: "The request body must be a JSON object" }
  }
  const { bytes, content, ...fields } = parsed as Record<string, unknown>
  const hasBytes = bytes !== undefined && bytes !== null
  const hasContent = content !== undefined && content !== null
  if (hasBytes && hasContent) return { param: "content", message: "content: give either bytes or content, not both" }
  if (!hasBytes && !hasContent) return { param: "bytes", message: "bytes: one of bytes or content is required" }
  if (hasBytes && typeof bytes !== "string") return { param: "bytes", message: `bytes: expected a string, got ${Array.isArray(bytes) ? "an array" : `a ${typeof bytes}`}` }

  const contentField = hasBytes ? "bytes" : "content"
  const raw = hasBytes ? bytes : content
  let contentText: string
  try {
    contentText = typeof raw === "string" ? raw : JSON.stringify(raw)
  } catch {
    // Only a value nested thousands of levels deep makes JSON.stringify run out of stack.
    return { param: "content", message: "content: nested too deeply to serialize; send it as bytes" }
  }
  // An unpaired surrogate has no UTF-8 form: storing it would silently change the content.
  if (typeof raw === "string" && !isWellFormed(raw)) {
    return { param: contentField, message: `${contentField}: contains an unpaired UTF-16 surrogate, which cannot be stored as UTF-8` }
  }
  const utf8 = Buffer.from(contentText, "utf8")
  return {
    fields,
    contentField,
    text: contentText,
    value: typeof raw === "string" ? undefined : raw,
    bytes: new Uint8Array(utf8.buffer, utf8.byteOffset, utf8.length),
    sha256: createHash("sha256").update(utf8).digest("hex")
  }
}

export const isEnvelopeError = (e: Envelope | EnvelopeError): e is EnvelopeError => !("sha256" in e)
