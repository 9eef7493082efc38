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
