/**
 * Routes the spec names that this deployment does not serve yet. They answer the spec's 501
 * `not_implemented` in the shape of their family — not 404 — so a client can
 * tell "not here" from "bad id". No key is needed to learn that: the answer reveals nothing.
 * Each group goes away when its surface is built.
 */
import { Effect } from "effect"
import { NotImplemented } from "../errors.ts"
import type { RouteServices } from "./route-services.ts"
import { type Method, type RequestContext, type RouteDef, shapeForUnknownPath } from "./route.ts"

const unserved = (surface: string) => (method: Method, path: string): RouteDef<RouteServices> => ({
  method,
  path,
  // The error shape of the family the path belongs to (Messages batches: the Messages shape).
  shape: shapeForUnknownPath(path),
  auth: "none",
  handler: (_ctx: RequestContext) => Effect.fail(new NotImplemented({ message: `${surface} are not enabled on this deployment` }))
})

const batches = unserved("Batches")

/** Anthropic's Messages batches, OpenAI's batches and the files OpenAI batches are uploaded as. */
export const batchRoutes: ReadonlyArray<RouteDef<RouteServices>> = [
  batches("POST", "/v1/messages/batches"),
  batches("GET", "/v1/messages/batches"),
  batches("GET", "/v1/messages/batches/{id}"),
  batches("DELETE", "/v1/messages/batches/{id}"),
  batches("POST", "/v1/messages/batches/{id}/cancel"),
  batches("GET", "/v1/messages/batches/{id}/results"),
  batches("POST", "/v1/batches"),
  batches("GET", "/v1/batches"),
  batches("GET", "/v1/batches/{id}"),
  batches("POST", "/v1/batches/{id}/cancel"),
  batches("POST", "/v1/files"),
  batches("GET", "/v1/files"),
  batches("GET", "/v1/files/{id}"),
  batches("DELETE", "/v1/files/{id}"),
  batches("GET", "/v1/files/{id}/content")
]
