/**
 * Route definitions and matching. We match paths ourselves (instead of the router's own table) so
 * that a known path with the wrong method answers 405 with `Allow`, an unknown one 404 in the shape
 * of the surface the path belongs to, and colon paths like `/v1/states/{id}:append` work.
 */
import { Effect, type Scope } from "effect"
import type { SqlError } from "effect/sql"
import type { IncomingMessage } from "node:http"
import type { HttpServerRequest, HttpServerResponse } from "effect/http"
import { type ApiError, Unauthenticated } from "../errors.ts"
import type { KeyRecord } from "../keys/keys-repo.ts"
import type { RequestRecord } from "../observability/request-record.ts"
import type { Surface } from "../keys/surfaces.ts"
import type { BodyBudget } from "./body-budget.ts"

/**
 * `headers` with the request's id in the two headers the SDKs read it from (OpenAI's
 * `x-request-id`, Anthropic's `request-id`): on every answer, whoever writes it.
 */
export const withRequestId = (headers: Record<string, string>, requestId: string): Record<string, string> => ({
  ...headers,
  "x-request-id": requestId,
  "request-id": requestId
})

/** Which error body a route answers with (spec: dialect shapes vs the flat shape). */
export type ErrorShape = "messages" | "openai" | "flat"

/**
 * How a route authenticates (spec, Authentication rules 2–5):
 * - `none`: public (the model catalog);
 * - `messages`: `x-api-key`, or `Authorization: Bearer`;
 * - `bearer`: `Authorization: Bearer` only;
 * - `admin`: `Authorization: Bearer <admin token>`.
 */
export type AuthMode = "none" | "messages" | "bearer" | "admin"

export type Method = "GET" | "POST" | "PUT" | "PATCH" | "DELETE"

export interface RequestContext {
  readonly request: HttpServerRequest.HttpServerRequest
  /** The request's headers, read once (`requestHeaders`). */
  readonly headers: Readonly<Record<string, string | undefined>>
  readonly params: Readonly<Record<string, string>>
  readonly query: URLSearchParams
  readonly requestId: string
  /** The authenticated key, on routes with `messages` or `bearer` auth. */
  readonly key: KeyRecord | undefined
  /** What the request did, for its metrics and log line: handlers fill in what they learn. */
  readonly record: RequestRecord
  /** The gateway's count of request bodies in flight (`body-budget.ts`); the simulator's stand-in upstream keeps none. */
  readonly bodyBudget?: BodyBudget | undefined
}

export interface RouteDef<R = never> {
  readonly method: Method
  /** Literal segments and `{name}` parameters; a parameter may carry a literal suffix: `{id}:append`. */
  readonly path: string
  readonly shape: ErrorShape
  readonly auth: AuthMode
  /** Permission surface a key must be allowed (403 otherwise). */
  readonly surface?: Surface
  /** Storage failures may escape a handler; the app answers them with 503 in the route's shape. */
  /** Handlers run in the request's scope (closed when the response, or its stream, ends). */
  readonly handler: (ctx: RequestContext) => Effect.Effect<HttpServerResponse.HttpServerResponse, ApiError | SqlError.SqlError, R | Scope.Scope>
}

/**
 * A family of routes that share an error shape, an auth mode and a permission surface:
 * `const route = routeFamily<Services>({ shape: "openai", auth: "bearer", surface: "batches" })`,
 * then `route("GET", "/v1/batches", list)`.
 */
export const routeFamily = <R>(common: Pick<RouteDef<R>, "shape" | "auth" | "surface">) =>
  (method: Method, path: string, handler: RouteDef<R>["handler"]): RouteDef<R> => ({ method, path, ...common, handler })

interface CompiledPath<R> {
  readonly path: string
  readonly pattern: RegExp
  readonly names: ReadonlyArray<string>
  readonly byMethod: Map<string, RouteDef<R>>
}

export type Match<R> =
  | { readonly _tag: "Found"; readonly route: RouteDef<R>; readonly params: Record<string, string> }
  | { readonly _tag: "WrongMethod"; readonly allow: ReadonlyArray<string>; readonly shape: ErrorShape }
  | { readonly _tag: "NoRoute"; readonly shape: ErrorShape }

/** A malformed escape (`%zz`) stays as sent: such an id simply matches nothing. */
const safeDecode = (segment: string) => {
  try {
    return decodeURIComponent(segment)
  } catch {
    return segment
  }
}

const escape = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")

const compile = (path: string) => {
  const names: Array<string> = []
  const source = path.split("/").map((segment) =>
    segment.replace(/\{(\w+)\}|([^{]+)/g, (_, name: string | undefined, literal: string | undefined) => {
      if (name !== undefined) {
        names.push(name)
        return "([^/:]+)"
      }
      return escape(literal ?? "")
    })
  ).join("/")
  return { pattern: new RegExp(`^${source}$`), names }
}

/** A path's family: its first segment, or its first two under `/v1` (`/v1/messages`, `/admin`). */
const familyOf = (path: string): string => {
  const [, first = "", second = ""] = path.split("/", 3)
  return first === "v1" ? `/v1/${second}` : `/${first}`
}

/**
 * The error shape of paths no route matches, by family: that of the routes of the path's family
 * when they all share one (`/v1/messages/nope` answers as Messages, `/metrics/x` and `/admin/x`
 * flat), else OpenAI's. Read from the route table itself, so a new family needs no second list.
 */
const unknownPathShapes = (routes: ReadonlyArray<{ readonly path: string; readonly shape: ErrorShape }>) => {
  const byFamily = new Map<string, ErrorShape | "mixed">()
  for (const route of routes) {
    const family = familyOf(route.path)
    const seen = byFamily.get(family)
    byFamily.set(family, seen === undefined || seen === route.shape ? route.shape : "mixed")
  }
  return (path: string): ErrorShape => {
    const shape = byFamily.get(familyOf(path))
    return shape === undefined || shape === "mixed" ? "openai" : shape
  }
}

export const makeMatcher = <R>(routes: ReadonlyArray<RouteDef<R>>) => {
  const paths: Array<CompiledPath<R>> = []
  const byPath = new Map<string, CompiledPath<R>>()
  const shapeOfUnknown = unknownPathShapes(routes)
  for (const route of routes) {
    let compiled = byPath.get(route.path)
    if (compiled === undefined) {
      compiled = { path: route.path, ...compile(route.path), byMethod: new Map() }
      byPath.set(route.path, compiled)
      paths.push(compiled)
    }
    if (compiled.byMethod.has(route.method)) throw new Error(`duplicate route ${route.method} ${route.path}`)
    compiled.byMethod.set(route.method, route)
  }
  // A path without parameters is found by one lookup, when no path before it in the table matches
  // it too (the table's first match wins): ~10 µs of a request's regex tests in a perf profile.
  const literal = new Map<string, CompiledPath<R>>()
  paths.forEach((compiled, i) => {
    if (compiled.names.length === 0 && !paths.slice(0, i).some((earlier) => earlier.pattern.test(compiled.path))) literal.set(compiled.path, compiled)
  })
  const found = (compiled: CompiledPath<R>, method: string, m: RegExpExecArray | undefined): Match<R> => {
    const route = compiled.byMethod.get(method) ?? (method === "HEAD" ? compiled.byMethod.get("GET") : undefined)
    if (route === undefined) {
      const first = compiled.byMethod.values().next().value as RouteDef<R>
      return { _tag: "WrongMethod", allow: [...compiled.byMethod.keys()], shape: first.shape }
    }
    const params: Record<string, string> = {}
    if (m !== undefined) {
      compiled.names.forEach((name, i) => {
        params[name] = safeDecode(m[i + 1])
      })
    }
    return { _tag: "Found", route, params }
  }
  return (method: string, pathname: string): Match<R> => {
    const path = pathname.length > 1 && pathname.endsWith("/") ? pathname.slice(0, -1) : pathname
    const known = literal.get(path)
    if (known !== undefined) return found(known, method, undefined)
    for (const compiled of paths) {
      const m = compiled.pattern.exec(path)
      if (m !== null) return found(compiled, method, m)
    }
    return { _tag: "NoRoute", shape: shapeOfUnknown(path) }
  }
}

/**
 * The request's headers: node:http's own record where the platform would only copy it. The
 * platform's `request.headers` builds a new record with every name lower-cased (node:http has
 * lower-cased them already) and any array value joined — ~13 µs of a request in a perf profile at
 * 200 req/s on a slow VM. node:http gives a request an array only for a repeated `set-cookie`; such
 * a request, an HTTP/2 one (pseudo-headers) and one whose target named its own host (the platform
 * then reads `host` from the target) get the platform's record.
 */
export const requestHeaders = (request: HttpServerRequest.HttpServerRequest): Readonly<Record<string, string | undefined>> => {
  const adapter = request as { readonly source?: Partial<IncomingMessage>; readonly headersOverride?: unknown }
  const source = adapter.source
  if (adapter.headersOverride !== undefined || source?.httpVersionMajor !== 1 || source.headers === undefined) return request.headers
  const headers = source.headers
  for (const name in headers) if (typeof headers[name] !== "string") return request.headers
  return headers as Readonly<Record<string, string>>
}

/** The path and query a request asks for. */
export interface RequestTarget {
  readonly pathname: string
  readonly searchParams: URLSearchParams
}

/** A path of unreserved characters only, no empty segment and none that starts with a dot. */
const PLAIN_PATH = /^\/(?:[\w~-][\w.~-]*\/)*(?:[\w~-][\w.~-]*)?$/
/**
 * What `new URL` reads differently in a query: a fragment, spaces, tabs and control characters
 * (cut), and anything beyond ASCII (encoded before the query is decoded).
 */
const UNPLAIN_QUERY = /[^\x21-\x7e]|#/

/**
 * The request target's path and query, as `new URL(target, base)` would read them. `new URL` cost
 * ~10 µs of every request (a perf profile of the non-streamed path at 200 req/s); a plain path needs
 * none of its work (dot segments, percent-encoded dots, a target that reads as a host), so one is
 * taken as it is and everything else still goes through `new URL`.
 */
export const requestTarget = (target: string): RequestTarget => {
  const at = target.indexOf("?")
  const path = at === -1 ? target : target.slice(0, at)
  if (!PLAIN_PATH.test(path) || UNPLAIN_QUERY.test(target)) {
    try {
      const url = new URL(target, "http://gateway")
      return { pathname: url.pathname, searchParams: url.searchParams }
    } catch {
      // A target that reads as an empty host (`//`): no route has that path, so it is answered 404.
      return { pathname: path, searchParams: new URLSearchParams() }
    }
  }
  // From the `?` on: the constructor drops one leading `?`, and a query may itself start with one.
  return { pathname: path, searchParams: new URLSearchParams(at === -1 ? "" : target.slice(at)) }
}

/**
 * The key of a route with `messages` or `bearer` auth (app.ts has authenticated it); typed as a
 * failure too, so a handler mounted on a route without auth answers 401 instead of crashing.
 */
export const requireKey = (ctx: RequestContext): Effect.Effect<KeyRecord, Unauthenticated> =>
  ctx.key === undefined ? Effect.fail(new Unauthenticated({ message: "Missing API key" })) : Effect.succeed(ctx.key)

