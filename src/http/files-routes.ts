/**
 * OpenAI's Files API (Bearer, OpenAI error shape, permission surface `batches`): upload as
 * multipart (`file` + `purpose`, optional `expires_after[anchor]`/`expires_after[seconds]`), list,
 * retrieve, content, delete. Files belong to the key: another key's id is 404. An upload larger than
 * `GATEWAY_FILE_MAX_BYTES` is a 413 naming `file`; the body is read as a stream, never whole.
 */
import { Effect, Stream } from "effect"
import { HttpServerResponse, type Multipart } from "effect/http"
import { InvalidRequest, PayloadTooLarge, RequestTimeout } from "../errors.ts"
import { FilesRepo } from "../files/files-repo.ts"
import { bodyLimit } from "./body.ts"
import { findBodyStalled } from "./body-idle.ts"
import { jsonResponse } from "./json.ts"
import { type RequestContext, requireKey, routeFamily, type RouteDef } from "./route.ts"
import { limitParam } from "./limit-param.ts"

/** The purposes OpenAI accepts on upload. */
const PURPOSES = ["assistants", "batch", "fine-tune", "vision", "user_data", "evals"] as const
/** Multipart framing and the other fields, on top of the file itself. */
const FORM_OVERHEAD_BYTES = 64 * 1024
const MAX_FILENAME = 512

interface Upload {
  purpose?: string
  filename?: string
  chunks: Array<Uint8Array>
  bytes: number
  anchor?: string
  seconds?: string
  /** Parts named `file` (exactly one is accepted). */
  files: number
}

/** One part of the form into `upload` (made once: a generator per part would outlive scavenges). */
const readPart = Effect.fnUntraced(function*(part: Multipart.Part, upload: Upload, maxBytes: number, tooLarge: PayloadTooLarge) {
  if (part._tag === "Field") {
    if (part.key === "purpose") upload.purpose = part.value
    else if (part.key === "expires_after[anchor]") upload.anchor = part.value
    else if (part.key === "expires_after[seconds]") upload.seconds = part.value
    return
  }
  if (part._tag !== "File") return
  if (part.key !== "file") return yield* Stream.runDrain(part.content.pipe(Stream.mapError(() => tooLarge)))
  upload.files++
  upload.filename = part.name
  yield* part.content.pipe(
    Stream.mapError(() => tooLarge),
    Stream.runForEach((chunk) => {
      upload.bytes += chunk.byteLength
      if (upload.bytes > maxBytes) return Effect.fail(tooLarge)
      upload.chunks.push(chunk)
      return Effect.void
    })
  )
})

const readUpload = Effect.fnUntraced(function*(ctx: RequestContext, maxBytes: number) {
  const contentType = ctx.headers["content-type"] ?? ""
  if (!contentType.toLowerCase().startsWith("multipart/form-data")) {
    return yield* new InvalidRequest({ message: "Expected a multipart/form-data body with the fields file and purpose", param: "file" })
  }
  const declared = Number(ctx.headers["content-length"] ?? "0")
  const tooLarge = new PayloadTooLarge({ limitBytes: maxBytes, message: `file: files are limited to ${maxBytes} bytes`, param: "file" })
  if (declared > maxBytes + FORM_OVERHEAD_BYTES) return yield* tooLarge
  const upload: Upload = { chunks: [], bytes: 0, files: 0 }
  yield* ctx.request.multipartStream.pipe(
    Stream.mapError((error): InvalidRequest | PayloadTooLarge | RequestTimeout => {
      const reason = error.reason._tag
      if (reason === "FileTooLarge" || reason === "BodyTooLarge") return tooLarge
      if (reason === "TooManyParts" || reason === "FieldTooLarge") return new InvalidRequest({ message: "The form has too many or too large fields" })
      const stalled = findBodyStalled(error.reason.cause)
      return stalled !== undefined
        ? new RequestTimeout({ message: `The request body stalled: ${stalled.message}` })
        : new InvalidRequest({ message: "The multipart body could not be parsed", param: "file" })
    }),
    Stream.runForEach((part) => readPart(part, upload, maxBytes, tooLarge)),
    bodyLimit(maxBytes + FORM_OVERHEAD_BYTES)
  )
  if (upload.files !== 1) return yield* new InvalidRequest({ message: "file: exactly one file is required", param: "file" })
  return upload
})

const upload = Effect.fnUntraced(function*(ctx: RequestContext) {
  const files = yield* FilesRepo
  const form = yield* readUpload(ctx, files.maxBytes)
  if (form.purpose === undefined || !(PURPOSES as ReadonlyArray<string>).includes(form.purpose)) {
    return yield* new InvalidRequest({ message: `purpose: expected one of ${PURPOSES.join(", ")}`, param: "purpose" })
  }
  const filename = (form.filename ?? "").trim() === "" ? "upload" : form.filename!
  if (filename.length > MAX_FILENAME || /[\u0000]/.test(filename)) {
    return yield* new InvalidRequest({ message: `file: the file name must be at most ${MAX_FILENAME} characters without NUL`, param: "file" })
  }
  let expiresAt: Date | null = null
  if (form.seconds !== undefined || form.anchor !== undefined) {
    const seconds = Number(form.seconds)
    if (form.anchor !== "created_at") {
      return yield* new InvalidRequest({ message: "expires_after[anchor]: expected created_at", param: "expires_after[anchor]" })
    }
    if (!Number.isInteger(seconds) || seconds < 3600 || seconds > 2_592_000) {
      return yield* new InvalidRequest({ message: "expires_after[seconds]: expected an integer from 3600 to 2592000", param: "expires_after[seconds]" })
    }
    expiresAt = new Date(Date.now() + seconds * 1000)
  }
  // The pieces as they arrived: the store cuts them into its chunks as it writes them.
  const file = yield* files.create((yield* requireKey(ctx)).id, { filename, purpose: form.purpose, content: form.chunks, expiresAt })
  return jsonResponse(file)
})

const LIST_MAX = 10_000

const list = Effect.fnUntraced(function*(ctx: RequestContext) {
  const limit = yield* limitParam(ctx, { default: LIST_MAX, max: LIST_MAX })
  const order = ctx.query.get("order") ?? "desc"
  if (order !== "asc" && order !== "desc") return yield* new InvalidRequest({ message: "order: expected asc or desc", param: "order" })
  const after = ctx.query.get("after") ?? undefined
  const purpose = ctx.query.get("purpose") ?? undefined
  const page = yield* (yield* FilesRepo).list((yield* requireKey(ctx)).id, {
    limit,
    order,
    ...(after === undefined ? {} : { after }),
    ...(purpose === undefined ? {} : { purpose })
  })
  return jsonResponse(page)
})

const retrieve = Effect.fnUntraced(function*(ctx: RequestContext) {
  return jsonResponse(yield* (yield* FilesRepo).get((yield* requireKey(ctx)).id, ctx.params.id))
})

const content = Effect.fnUntraced(function*(ctx: RequestContext) {
  const { content } = yield* (yield* FilesRepo).content((yield* requireKey(ctx)).id, ctx.params.id)
  return HttpServerResponse.uint8Array(content, { contentType: "application/octet-stream" })
})

const remove = Effect.fnUntraced(function*(ctx: RequestContext) {
  yield* (yield* FilesRepo).remove((yield* requireKey(ctx)).id, ctx.params.id)
  return jsonResponse({ id: ctx.params.id, object: "file", deleted: true })
})

const route = routeFamily<FilesRepo>({ shape: "openai", auth: "bearer", surface: "batches" })

export const filesRoutes: ReadonlyArray<RouteDef<FilesRepo>> = [
  route("POST", "/v1/files", upload),
  route("GET", "/v1/files", list),
  route("GET", "/v1/files/{id}", retrieve),
  route("DELETE", "/v1/files/{id}", remove),
  route("GET", "/v1/files/{id}/content", content)
]

