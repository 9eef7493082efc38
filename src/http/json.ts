/**
 * JSON responses with the content type the SDKs require (`application/json`, else they see a
 * string). A large body (a run's tools, a stored response: up to 16 MiB each)
 * is serialized in slices as it is sent (`util/sliced-stringify.ts`), so writing it never holds
 * the event loop; `JSON.stringify` of a 16 MiB string alone held it 170–300 ms on a slow VM. Such a
 * body goes out chunked (`transfer-encoding: chunked`): its length is known only once it is made.
 */
import { Effect, Stream } from "effect"
import { HttpServerResponse } from "effect/http"
import { isLarge, jsonChunksInSlices } from "../util/sliced-stringify.ts"

export const jsonResponse = (body: unknown, options?: { readonly status?: number; readonly headers?: Record<string, string> }) => {
  const init = { status: options?.status ?? 200, ...(options?.headers ? { headers: options.headers } : {}) }
  if (!isLarge(body)) return HttpServerResponse.jsonUnsafe(body, init)
  // One chunk per pull: the server joins whatever one pull gives into one buffer before writing.
  const chunks = Stream.unwrap(Effect.map(jsonChunksInSlices(body), ({ chunks }) => Stream.fromIterable(chunks, { chunkSize: 1 })))
  return HttpServerResponse.stream(chunks, { ...init, contentType: "application/json" })
}

/** Up to this size bytes in pieces are written as one buffer. */
const ONE_WRITE_BYTES = 64 * 1024

/**
 * Bytes already made, in pieces (stored text, encoded frames), as a response with their length: a
 * small answer in one write, a large one a piece per write — one buffer would be one more copy of
 * it all, made in one turn of the event loop.
 */
export const bytesResponse = (
  pieces: ReadonlyArray<Uint8Array>,
  options: { readonly contentType: string; readonly status?: number; readonly headers?: Record<string, string> }
) => {
  const bytes = pieces.reduce((sum, piece) => sum + piece.byteLength, 0)
  // One piece per pull: the server joins whatever one pull gives into one buffer before writing.
  return bytes <= ONE_WRITE_BYTES
    ? HttpServerResponse.uint8Array(Buffer.concat(pieces, bytes), options)
    : HttpServerResponse.stream(Stream.fromIterable(pieces, { chunkSize: 1 }), { ...options, contentLength: bytes })
}
