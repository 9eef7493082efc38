/**
 * The dashboard's page, its assets and its session (`/dashboard`, flat error shape):
 * - `GET /dashboard`, `/dashboard/{page}`, `/dashboard/runs/{id}`, `/dashboard/artifacts/{id}`,
 *   `/dashboard/batches/{id}`: the page shell (`no-cache`, ETag);
 *   the client draws the page named by the path;
 * - `GET /dashboard/assets/{file}`: hashed bundles, immutable for a year, gzip when accepted;
 * - `POST /dashboard/api/session {token}` signs in with the admin token or an `svc_` key and sets
 *   the session cookie; `GET` reads the session (with its CSRF token); `DELETE` signs out.
 *
 * The data endpoints are in `dashboard-api-routes.ts`.
 */
import { Effect, Schema } from "effect"
import { HttpServerResponse } from "effect/http"
import { NotFound, ServiceUnavailable, Unauthenticated } from "../errors.ts"
import { DashboardAssets, type StaticFile } from "../dashboard/assets.ts"
import { clearedSessionCookie, jsonBodyOnly, notCrossSite, requireSession, sessionCookie, sessionIdOf } from "../dashboard/guard.ts"
import { type DashboardSession, DashboardSessions } from "../dashboard/sessions.ts"
import { Settings } from "../config/settings.ts"
import { readBody } from "./body.ts"
import { jsonResponse } from "./json.ts"
import type { RouteServices } from "./route-services.ts"
import type { RequestContext, RouteDef } from "./route.ts"

/** Surfaces other parts of the gateway may add; the dashboard shows their nav entry when served. */
export interface DashboardExtensions {
  readonly artifacts: boolean
  readonly batches: boolean
}

/** What the page may load: only this origin, no inline script or style, never framed. */
const PAGE_HEADERS = {
  "content-security-policy": [
    "default-src 'self'", "script-src 'self'", "style-src 'self'", "img-src 'self' data:", "connect-src 'self'",
    "font-src 'self'", "object-src 'none'", "base-uri 'none'", "form-action 'self'", "frame-ancestors 'none'"
  ].join("; "),
  "x-content-type-options": "nosniff",
  "x-frame-options": "DENY",
  "referrer-policy": "no-referrer"
}

const acceptsGzip = (ctx: RequestContext) => /\bgzip\b/.test(ctx.headers["accept-encoding"] ?? "")

const serveFile = (ctx: RequestContext, file: StaticFile, cacheControl: string, extra: Record<string, string> = {}) => {
  const headers: Record<string, string> = { "cache-control": cacheControl, etag: file.etag, vary: "accept-encoding", ...extra }
  if (ctx.headers["if-none-match"] === file.etag) return HttpServerResponse.empty({ status: 304, headers })
  const gzip = file.gzip !== undefined && acceptsGzip(ctx)
  return HttpServerResponse.uint8Array(gzip ? file.gzip! : file.body, {
    contentType: file.contentType,
    headers: gzip ? { ...headers, "content-encoding": "gzip" } : headers
  })
}

const page = Effect.fnUntraced(function*(ctx: RequestContext) {
  const { index } = yield* DashboardAssets
  if (index === undefined) {
    return yield* new ServiceUnavailable({ status: 503, message: "The dashboard is not built: run `npm run build:dashboard`" })
  }
  return serveFile(ctx, index, "no-cache", PAGE_HEADERS)
})

const asset = Effect.fnUntraced(function*(ctx: RequestContext) {
  const file = (yield* DashboardAssets).asset(ctx.params.file)
  if (file === undefined) return yield* new NotFound({ kind: "route", message: `No dashboard asset ${ctx.params.file}; reload the page` })
  return serveFile(ctx, file, "public, max-age=31536000, immutable", { "x-content-type-options": "nosniff" })
})

const sessionView = (session: DashboardSession, extensions: DashboardExtensions, metering: boolean) => ({
  object: "dashboard_session",
  role: session.role,
  key: session.key === undefined ? null : { id: session.key.id, name: session.key.name, hint: session.key.hint, plan: session.key.plan },
  csrfToken: session.csrfToken,
  expiresAt: session.expiresAt.toISOString(),
  features: extensions,
  metering
})

const SignInBody = Schema.Struct({ token: Schema.String.check(Schema.isMinLength(1), Schema.isMaxLength(1_000)) })
const readSignIn = readBody(SignInBody)

const noStore = { "cache-control": "no-store" }

const signInWith = Effect.fnUntraced(function*(extensions: DashboardExtensions, ctx: RequestContext) {
  yield* notCrossSite(ctx)
  yield* jsonBodyOnly(ctx)
  const { token } = yield* readSignIn(ctx)
  const sessions = yield* DashboardSessions
  const signedIn = yield* sessions.signIn(token.trim())
  if (signedIn === undefined) {
    return yield* new Unauthenticated({ message: "Sign-in failed: that is neither the admin token nor an active API key" })
  }
  const { metering } = yield* Settings
  return jsonResponse(sessionView(signedIn.session, extensions, metering), {
    headers: { ...noStore, "set-cookie": sessionCookie(ctx, signedIn.sessionId, sessions.ttlMs) }
  })
})

const signIn = (extensions: DashboardExtensions) => (ctx: RequestContext) => signInWith(extensions, ctx)

const readSessionWith = Effect.fnUntraced(function*(extensions: DashboardExtensions, ctx: RequestContext) {
  const session = yield* requireSession(ctx, "signed-in")
  const { metering } = yield* Settings
  return jsonResponse(sessionView(session, extensions, metering), { headers: noStore })
})

const readSession = (extensions: DashboardExtensions) => (ctx: RequestContext) => readSessionWith(extensions, ctx)

const signOut = Effect.fnUntraced(function*(ctx: RequestContext) {
  yield* requireSession(ctx, "signed-in")
  yield* (yield* DashboardSessions).signOut(sessionIdOf(ctx)!)
  return jsonResponse({ signedOut: true }, { headers: { ...noStore, "set-cookie": clearedSessionCookie(ctx) } })
})

export const dashboardRoutes = (extensions: DashboardExtensions): ReadonlyArray<RouteDef<RouteServices>> => [
  { method: "GET", path: "/dashboard", shape: "flat", auth: "none", handler: page },
  { method: "GET", path: "/dashboard/assets/{file}", shape: "flat", auth: "none", handler: asset },
  { method: "POST", path: "/dashboard/api/session", shape: "flat", auth: "none", handler: signIn(extensions) },
  { method: "GET", path: "/dashboard/api/session", shape: "flat", auth: "none", handler: readSession(extensions) },
  { method: "DELETE", path: "/dashboard/api/session", shape: "flat", auth: "none", handler: signOut },
  { method: "GET", path: "/dashboard/runs/{id}", shape: "flat", auth: "none", handler: page },
  { method: "GET", path: "/dashboard/artifacts/{id}", shape: "flat", auth: "none", handler: page },
  { method: "GET", path: "/dashboard/batches/{id}", shape: "flat", auth: "none", handler: page },
  // Last: any other single segment is a client-side page (an unknown one says so itself).
  { method: "GET", path: "/dashboard/{page}", shape: "flat", auth: "none", handler: page }
]
