/**
 * Who may call a dashboard endpoint, and the CSRF rules for the ones that change something.
 *
 * - The session cookie is `HttpOnly` (scripts cannot read it), `SameSite=Strict` (no other site
 *   can make the browser send it), scoped to `/dashboard`, and `Secure` when the request came over
 *   HTTPS (`X-Forwarded-Proto: https` from the TLS terminator in front of the gateway).
 * - Every state-changing request must also carry the session's CSRF token in `x-csrf-token`: a
 *   custom header another origin cannot set without a CORS preflight we never grant, and a value
 *   it cannot read. Browsers that send `Sec-Fetch-Site: cross-site` are refused outright.
 * - Sign-in has no session yet: it needs a JSON body (a cross-site form cannot send one) and a
 *   request that is not cross-site, so no other page can sign a visitor in to its own session.
 */
import { Effect } from "effect"
import type { SqlError } from "effect/sql"
import { InvalidRequest, PermissionDenied, Unauthenticated } from "../errors.ts"
import type { RequestContext } from "../http/route.ts"
import { type DashboardSession, DashboardSessions } from "./sessions.ts"

const SESSION_COOKIE = "svc_dashboard"
const CSRF_HEADER = "x-csrf-token"

/** `operator`: the admin token's sessions only; `signed-in`: operators and key holders. */
export type Access = "operator" | "signed-in"

const overHttps = (ctx: RequestContext) =>
  (ctx.headers["x-forwarded-proto"] ?? "").split(",")[0].trim().toLowerCase() === "https"

export const sessionCookie = (ctx: RequestContext, sessionId: string, maxAgeMs: number) =>
  `${SESSION_COOKIE}=${sessionId}; Path=/dashboard; HttpOnly; SameSite=Strict; Max-Age=${Math.floor(maxAgeMs / 1000)}` +
  (overHttps(ctx) ? "; Secure" : "")

export const clearedSessionCookie = (ctx: RequestContext) =>
  `${SESSION_COOKIE}=; Path=/dashboard; HttpOnly; SameSite=Strict; Max-Age=0` + (overHttps(ctx) ? "; Secure" : "")

/** Refuses requests a browser marks as coming from another site. */
export const notCrossSite = (ctx: RequestContext) =>
  ctx.headers["sec-fetch-site"] === "cross-site"
    ? Effect.fail(new PermissionDenied({ message: "Cross-site requests to the dashboard are refused" }))
    : Effect.void

/** A body that is not JSON is refused before it is read (cross-site forms cannot send JSON). */
export const jsonBodyOnly = (ctx: RequestContext) => {
  const type = (ctx.headers["content-type"] ?? "").split(";")[0].trim().toLowerCase()
  return type === "application/json"
    ? Effect.void
    : Effect.fail(new InvalidRequest({ message: "content-type: the dashboard API takes application/json bodies", param: "content-type" }))
}

export const sessionIdOf = (ctx: RequestContext): string | undefined => {
  const value = ctx.request.cookies[SESSION_COOKIE]
  return value === undefined || value === "" ? undefined : value
}

/**
 * The caller's session, checked for the access the endpoint needs; for state-changing methods
 * also the CSRF token. 401 when signed out (the message says why: expired, revoked, …), 403 for
 * a key holder on an operator page or a missing/wrong CSRF token.
 */
export const requireSession = Effect.fnUntraced(function*(
  ctx: RequestContext,
  access: Access
): Effect.fn.Return<DashboardSession, Unauthenticated | PermissionDenied | SqlError.SqlError, DashboardSessions> {
  const changes = ctx.request.method !== "GET" && ctx.request.method !== "HEAD"
  if (changes) yield* notCrossSite(ctx)
  const sessionId = sessionIdOf(ctx)
  if (sessionId === undefined) return yield* new Unauthenticated({ message: "Sign in to the dashboard first" })
  const sessions = yield* DashboardSessions
  const found = yield* sessions.lookup(sessionId)
  if (found._tag === "Ended") return yield* new Unauthenticated({ message: found.reason })
  const { session } = found
  if (access === "operator" && session.role !== "operator") {
    return yield* new PermissionDenied({ message: "Only operators (signed in with the admin token) can see this" })
  }
  if (changes && !sessions.csrfMatches(session, ctx.headers[CSRF_HEADER])) {
    return yield* new PermissionDenied({ message: `Missing or wrong CSRF token (${CSRF_HEADER}); reload the dashboard and try again` })
  }
  return session
})
