/** JSON responses with the content type the SDKs require (`application/json`, else they see a string). */
import { HttpServerResponse } from "effect/http"

export const jsonResponse = (body: unknown, options?: { readonly status?: number; readonly headers?: Record<string, string> }) =>
  HttpServerResponse.jsonUnsafe(body, { status: options?.status ?? 200, ...(options?.headers ? { headers: options.headers } : {}) })
