/**
 * The dashboard's artifact views (`/dashboard/api/artifacts*`, session cookie, flat error shape):
 * - key holders see their key's artifacts, scoped exactly as `/v1/artifacts` is (the key's
 *   `artifacts` surface is required, another key's id is 404 everywhere, never listed);
 * - operators see every key's artifacts, read-only: the list (filtered by key), a descriptor and
 *   queries, each read through `Artifacts` with the owning key, so they answer what that key would.
 * Query bodies are the artifact API's own (`POST /v1/artifacts/{id}/query`), checked by the service.
 */
import { Effect } from "effect"
import { HttpServerResponse } from "effect/http"
import { Artifacts } from "../artifacts/artifacts.ts"
import { ArtifactList } from "../dashboard/artifact-list.ts"
import type { DashboardSession } from "../dashboard/sessions.ts"
import { InvalidRequest, PermissionDenied } from "../errors.ts"
import { allowsSurface } from "../keys/permissions.ts"
import { readJson } from "./body.ts"
import { dashboardApi } from "./dashboard-api-routes.ts"
import { keyLabel, listedKeyId, listPage } from "./dashboard-list-query.ts"
import { jsonResponse } from "./json.ts"
import type { RouteServices } from "./route-services.ts"
import type { RequestContext, RouteDef } from "./route.ts"

const NO_STORE = { "cache-control": "no-store" }

/** A key holder needs the key's `artifacts` surface, as on the API (403 naming it otherwise). */
const requireSurface = (session: DashboardSession) =>
  session.role === "key" && !allowsSurface(session.key.permissions, "artifacts")
    ? Effect.fail(new PermissionDenied({ message: "This key is not allowed to use the artifacts surface" }))
    : Effect.void

/** The key whose artifact this is, when the session may see it: the holder's own, else 404. */
const ownerOf = Effect.fnUntraced(function*(session: DashboardSession, artifactId: string) {
  if (session.role === "key") return session.key.id
  return yield* (yield* ArtifactList).owner(artifactId)
})

const listArtifacts = Effect.fnUntraced(function*(ctx: RequestContext, session: DashboardSession) {
  yield* requireSurface(session)
  const query = yield* listPage(ctx)
  const keyId = yield* listedKeyId(session, query.keyId)
  const page = yield* (yield* ArtifactList).list({ keyId, limit: query.limit, after: query.after })
  return jsonResponse({ object: "list", ...page }, { headers: NO_STORE })
})

/** `?version=N`: a positive integer, as on `GET /v1/artifacts/{id}`. */
const versionParam = (ctx: RequestContext) => {
  const raw = ctx.query.get("version")
  if (raw === null || raw === "") return Effect.succeed(undefined)
  return /^[1-9]\d{0,8}$/.test(raw)
    ? Effect.succeed(Number(raw))
    : Effect.fail(new InvalidRequest({ message: `version: expected a positive integer, got ${JSON.stringify(raw)}`, param: "version" }))
}

const describeArtifact = Effect.fnUntraced(function*(ctx: RequestContext, session: DashboardSession) {
  yield* requireSurface(session)
  const version = yield* versionParam(ctx)
  const keyId = yield* ownerOf(session, ctx.params.id)
  const descriptor = yield* (yield* Artifacts).describe(keyId, ctx.params.id, version)
  const key = yield* keyLabel(session, keyId)
  return jsonResponse({ object: "dashboard_artifact", keyId, key, descriptor }, { headers: NO_STORE })
})

const queryArtifact = Effect.fnUntraced(function*(ctx: RequestContext, session: DashboardSession) {
  yield* requireSurface(session)
  const keyId = yield* ownerOf(session, ctx.params.id)
  const body = yield* readJson(ctx, { optional: true })
  const text = yield* (yield* Artifacts).query(keyId, ctx.params.id, body)
  return HttpServerResponse.text(text, { contentType: "application/json", headers: NO_STORE })
})

export const dashboardArtifactsRoutes: ReadonlyArray<RouteDef<RouteServices>> = [
  dashboardApi("GET", "/artifacts", "signed-in", listArtifacts),
  dashboardApi("GET", "/artifacts/{id}", "signed-in", describeArtifact),
  // POST because a query has a body; it reads only (and needs the CSRF token like every POST).
  dashboardApi("POST", "/artifacts/{id}/query", "signed-in", queryArtifact)
]
