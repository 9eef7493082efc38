/**
 * The HTTP application: one Effect per request that matches the route, authenticates, checks
 * permissions, runs the handler and renders any error in the route's shape. Every response carries
 * `x-request-id` (read by the OpenAI SDK) and `request-id` (read by the Anthropic SDK).
 */
import { Cause, Effect, Exit, Scope } from "effect"
import type { SqlError } from "effect/sql"
import { HttpBody, HttpServerRequest, HttpServerResponse } from "effect/http"
import { Settings } from "../config/settings.ts"
import {
  type ApiError,
  InvalidRequest,
  MethodNotAllowed,
  NotFound,
  PayloadTooLarge,
  PermissionDenied,
  ServiceUnavailable,
  Unauthenticated
} from "../errors.ts"
import { AdminToken } from "../keys/admin-token.ts"
import { ApiKeys } from "../keys/api-keys.ts"
import type { KeyRecord } from "../keys/keys-repo.ts"
import { allowsSurface } from "../keys/permissions.ts"
import { newRequestRecord, type RequestRecord } from "../observability/request-record.ts"
import { Telemetry } from "../observability/telemetry.ts"
import { serverMessage, sqlErrorDefect, storageFailureKind } from "../storage/sql-failures.ts"
import { MAX_STORED_JSON_BYTES, textProblem } from "../util/json-limits.ts"
import { bodyLimit } from "./body.ts"
import { BodyBudget } from "./body-budget.ts"
import { answerContinues, answeredDirectly } from "./node-sse.ts"
import { onExitPlain } from "../util/scoped.ts"
import { newId } from "../util/ids.ts"
import { errorSummary, renderDefect, renderError } from "./render-error.ts"
import { type ErrorShape, makeMatcher, type RequestContext, requestHeaders, requestTarget, type RequestTarget, type RouteDef, withRequestId } from "./route.ts"
import { RepeatedFailure } from "../util/repeated-failure.ts"

const bearerToken = (header: string | undefined) => {
  if (header === undefined) return undefined
  const m = /^Bearer\s+(\S+)\s*$/i.exec(header)
  return m === null ? undefined : m[1]
}

/** The metrics' `surface` of a route without a permission surface: its family. */
const unsurfacedFamily = (path: string): string =>
  path === "/healthz" || path === "/readyz"
    ? "health"
    : path === "/metrics"
    ? "metrics"
    : path.startsWith("/dashboard")
    ? "dashboard"
    : path.startsWith("/admin")
    ? "admin"
    : path.startsWith("/v1/models")
    ? "models"
    : "other"

/**
 * Path ids and query values that no stored id or filter can contain (a NUL from `%00`, an unpaired
 * surrogate) never reach SQL: such an id is 404, such a query value 400 naming the parameter.
 */
const checkTarget = (params: Readonly<Record<string, string>>, query: URLSearchParams): Effect.Effect<void, ApiError> => {
  for (const [name, value] of Object.entries(params)) {
    if (textProblem(value) !== undefined) {
      return Effect.fail(new NotFound({ kind: "resource", message: `Nothing has the ${name} given in the path: it contains a character no id has` }))
    }
  }
  for (const [name, value] of query) {
    const problem = textProblem(name) ?? textProblem(value)
    if (problem !== undefined) {
      const what = problem === "nul" ? "a NUL character (%00)" : "an unpaired UTF-16 surrogate"
      return Effect.fail(new InvalidRequest({ message: `${name}: the query parameter contains ${what}`, param: name }))
    }
  }
  return Effect.void
}

/**
 * Where a route's storage failure becomes a response, by `storageFailureKind` (sql-failures.ts):
 * the request's own data refused by the database (class 22: bad text, a number or date out of
 * range) a 400 and one too large for it (class 54) a 413 — a last line behind the validation of
 * each route, never a retryable 503; anything else an outage: 503 with `retry-after`.
 */
/**
 * An outage fails every request that needs the store (a full disk failed ~500 a second in a
 * benchmark of key updates, 2026-12-03): each request's own log line says it was a 503; the cause
 * is logged once, then once a minute with how many more there were.
 */
const storageOutages = new RepeatedFailure("storage unavailable")

export const storageFailure = (error: SqlError.SqlError): Effect.Effect<never, ApiError> => {
  switch (storageFailureKind(error)) {
    case "refused-value":
      return Effect.logWarning("the database refused a value that validation let through", error).pipe(
        Effect.andThen(Effect.fail(new InvalidRequest({ message: `The request holds a value that cannot be stored: ${serverMessage(error) ?? "data exception"}` })))
      )
    case "too-large":
      return Effect.logWarning("the database refused a value as too large", error).pipe(
        Effect.andThen(Effect.fail(new PayloadTooLarge({ limitBytes: MAX_STORED_JSON_BYTES, message: `The request holds a value too large to store: ${serverMessage(error) ?? "program limit exceeded"}` })))
      )
    case "outage":
      return storageOutages.failed("a request failed", error, "error").pipe(
        Effect.andThen(Effect.fail(new ServiceUnavailable({ status: 503, message: "Storage is unavailable; try again shortly", retryAfterSeconds: 1 })))
      )
  }
}

export const makeHttpApp = <R>(routes: ReadonlyArray<RouteDef<R>>) =>
  Effect.gen(function*() {
    const settings = yield* Settings
    const keys = yield* ApiKeys
    const adminToken = yield* AdminToken
    const match = makeMatcher(routes)
    const withLimit = bodyLimit(settings.maxBodyBytes)
    const bodyBudget = new BodyBudget(settings.bodyBytesInFlight, settings.maxBodyBytes)
    const telemetry = yield* Telemetry
    const metrics = telemetry.metrics

    const authenticate = (route: RouteDef<R>, headers: Record<string, string | undefined>): Effect.Effect<KeyRecord | undefined, ApiError> => {
      switch (route.auth) {
        case "none":
          return Effect.succeed(undefined)
        case "admin": {
          const token = bearerToken(headers["authorization"])
          return token !== undefined && adminToken.verify(token)
            ? Effect.succeed(undefined)
            : Effect.fail(new Unauthenticated({ message: "Admin endpoints need `Authorization: Bearer <admin token>`" }))
        }
        case "messages":
        case "bearer": {
          const secret = (route.auth === "messages" ? headers["x-api-key"] : undefined) ?? bearerToken(headers["authorization"])
          if (secret === undefined || secret === "") {
            return Effect.fail(new Unauthenticated({
              message: route.auth === "messages"
                ? "Missing API key: send it in the `x-api-key` header (or `Authorization: Bearer`)"
                : "Missing API key: send it as `Authorization: Bearer <API_KEY>`"
            }))
          }
          return keys.authenticate(secret).pipe(
            Effect.flatMap((key) =>
              key === undefined ? Effect.fail(new Unauthenticated({ message: "Invalid API key" })) : Effect.succeed(key)
            ),
            Effect.flatMap((key) =>
              route.surface !== undefined && !allowsSurface(key.permissions, route.surface)
                ? Effect.fail(new PermissionDenied({ message: `This key is not allowed to use the ${route.surface} surface` }))
                : Effect.succeed(key)
            )
          )
        }
      }
    }

    const respond = (request: HttpServerRequest.HttpServerRequest, requestId: string, url: RequestTarget, record: RequestRecord) => {
      const found = match(request.method, url.pathname)
      if (found._tag === "NoRoute") {
        return { shape: found.shape, effect: Effect.fail(new NotFound({ kind: "route", message: `Unknown route: ${request.method} ${url.pathname}` })) }
      }
      if (found._tag === "WrongMethod") {
        return { shape: found.shape, effect: Effect.fail(new MethodNotAllowed({ method: request.method, allow: found.allow })) }
      }
      const { route, params } = found
      record.surface = route.surface ?? unsurfacedFamily(route.path)
      const headers = requestHeaders(request)
      const effect = Effect.flatMap(authenticate(route, headers), (key) => {
        if (key !== undefined) record.keyId = key.id
        const ctx: RequestContext = { request, headers, params, query: url.searchParams, requestId, key, record, bodyBudget }
        return Effect.andThen(checkTarget(params, url.searchParams), route.handler(ctx))
      }).pipe(
        Effect.catchTag("SqlError", storageFailure),
        // A SqlError that escaped as a defect (e.g. out of a transaction whose rollback failed) is
        // still a storage failure, not a bug.
        Effect.catchCause((cause) => {
          const sqlDefect = sqlErrorDefect(cause)
          return sqlDefect === undefined ? Effect.failCause(cause) : storageFailure(sqlDefect)
        })
      )
      return { shape: route.shape as ErrorShape, effect }
    }

    /** A refused request: its error for the log line, and the metering rejections metric. */
    const noteError = (record: RequestRecord, error: ApiError) => {
      record.error = errorSummary(error)
      if (error._tag === "LimitExceeded" && metrics !== undefined) metrics.rejected(error.kind)
    }

    /**
     * The request's metrics and log line: now for a whole body, at the stream's end for a stream
     * (its tokens and cost are known only then). A client that leaves before any response is 499,
     * as nginx logs it.
     */
    const finished = (request: HttpServerRequest.HttpServerRequest, response: HttpServerResponse.HttpServerResponse, record: RequestRecord) => {
      record.status = response.status
      // A stream whose writer goes on after the handler (http/node-sse.ts) closes the request's
      // scope when it ends: the log line is written then, with the writer's defect if it had one.
      if (answerContinues(request)) return Effect.as(Effect.flatMap(Effect.scope, (scope) => Scope.addFinalizerExit(scope, (exit) => finishStream(record, exit))), response)
      const body = response.body
      if (body._tag !== "Stream") return Effect.as(telemetry.finish(record), response)
      return Effect.succeed(HttpServerResponse.setBody(
        response,
        HttpBody.stream(onExitPlain(body.stream, () => telemetry.finish(record)), body.contentType, body.contentLength)
      ))
    }

    /** The log line of a stream written past its handler, once its writer has ended. */
    const finishStream = (record: RequestRecord, exit: Exit.Exit<unknown, unknown>) => {
      if (Exit.isFailure(exit) && !Cause.hasInterruptsOnly(exit.cause)) {
        record.error = { type: "api_error", message: "request failed with a defect" }
        record.cause = Cause.pretty(exit.cause)
      }
      return telemetry.finish(record)
    }

    return Effect.gen(function*() {
      const request = yield* HttpServerRequest.HttpServerRequest
      const requestId = newId("req")
      const url = requestTarget(request.url)
      const record = newRequestRecord(requestId, request.method, url.pathname, performance.now())
      const { shape, effect } = respond(request, requestId, url, record)
      const response = yield* effect.pipe(
        withLimit,
        Effect.catch((error: ApiError) => {
          noteError(record, error)
          return Effect.succeed(renderError(error, shape, requestId))
        }),
        Effect.catchCause((cause) => {
          if (Cause.hasInterruptsOnly(cause)) {
            // A stream the handler writes itself (http/node-sse.ts) has its status already.
            if (record.status === 0) record.status = 499
            return Effect.andThen(telemetry.finish(record), Effect.failCause(cause))
          }
          // The request's log line (level error) carries the cause.
          record.error = { type: "api_error", message: "request failed with a defect" }
          record.cause = Cause.pretty(cause)
          return Effect.succeed(renderDefect(shape, requestId))
        })
      )
      // An answer the handler wrote itself carries these already (and the platform writes nothing more).
      return yield* finished(
        request,
        answeredDirectly(request) ? response : HttpServerResponse.setHeaders(response, withRequestId({}, requestId)),
        record
      )
    })
  })
