/**
 * http/route.ts: the route matcher (the table's first match wins, whether a path is looked up or
 * scanned) and the request's headers as handlers read them.
 */
import { Effect } from "effect"
import { type HttpServerRequest, HttpServerResponse } from "effect/http"
import { describe, expect, it } from "vitest"
import { makeMatcher, type Method, requestHeaders, type RouteDef } from "../../src/http/route.ts"
import { allRoutes } from "../../src/http/routes.ts"

const route = (method: Method, path: string): RouteDef<never> => ({
  method,
  path,
  shape: "openai",
  auth: "none",
  handler: () => Effect.succeed(HttpServerResponse.empty())
})

const describeMatch = (match: ReturnType<ReturnType<typeof makeMatcher<never>>>) =>
  match._tag === "Found" ? `${match.route.method} ${match.route.path} ${JSON.stringify(match.params)}`
  : match._tag === "WrongMethod" ? `405 ${match.allow.join(",")}`
  : "404"

describe("route matcher", () => {
  it("keeps the table's order: a parameter path before a literal one it matches still wins", () => {
    const match = makeMatcher([
      route("GET", "/v1/things/{id}"),
      route("GET", "/v1/things/latest"), // shadowed by the line above, as before
      route("POST", "/v1/other/latest"),
      route("GET", "/v1/other/{id}"), // after the literal: the literal wins for its own path
      route("GET", "/v1/plain")
    ])
    expect(describeMatch(match("GET", "/v1/things/latest"))).toBe('GET /v1/things/{id} {"id":"latest"}')
    expect(describeMatch(match("POST", "/v1/other/latest"))).toBe("POST /v1/other/latest {}")
    // The literal path matched first, with the wrong method: 405, as the scan answered.
    expect(describeMatch(match("GET", "/v1/other/latest"))).toBe("405 POST")
    expect(describeMatch(match("GET", "/v1/other/x%20y"))).toBe('GET /v1/other/{id} {"id":"x y"}')
    expect(describeMatch(match("GET", "/v1/plain"))).toBe("GET /v1/plain {}")
    expect(describeMatch(match("GET", "/v1/plain/"))).toBe("GET /v1/plain {}")
    expect(describeMatch(match("HEAD", "/v1/plain"))).toBe("GET /v1/plain {}")
    expect(describeMatch(match("DELETE", "/v1/plain"))).toBe("405 GET")
    expect(describeMatch(match("GET", "/v1/plain/more"))).toBe("404")
    expect(describeMatch(match("GET", "/v1/PLAIN"))).toBe("404")
  })

  it("finds every route of the gateway's table under its own path and method", () => {
    const match = makeMatcher(allRoutes)
    for (const { method, path } of allRoutes) {
      const concrete = path.replace(/\{(\w+)\}/g, "p1")
      const found = match(method, concrete)
      expect(found._tag, `${method} ${path}`).toBe("Found")
      if (found._tag === "Found") expect(`${found.route.method} ${found.route.path}`).toBe(`${method} ${path}`)
    }
  })
})

describe("requestHeaders", () => {
  // What the platform's request adapter holds: node:http's message as `source`, its own copy as `headers`.
  const adapted = (source: object, headersOverride?: object) =>
    ({ source, headersOverride, get headers() { return { copied: "yes" } } }) as unknown as HttpServerRequest.HttpServerRequest

  it("reads node:http's own record when every value is a string", () => {
    const headers = { authorization: "Bearer k", "content-type": "application/json" }
    expect(requestHeaders(adapted({ httpVersionMajor: 1, headers }))).toBe(headers)
  })

  it("takes the platform's record for a repeated set-cookie, an HTTP/2 request or a target that named its host", () => {
    expect(requestHeaders(adapted({ httpVersionMajor: 1, headers: { "set-cookie": ["a=1", "b=2"] } }))).toEqual({ copied: "yes" })
    expect(requestHeaders(adapted({ httpVersionMajor: 2, headers: { ":path": "/" } }))).toEqual({ copied: "yes" })
    expect(requestHeaders(adapted({ httpVersionMajor: 1, headers: { host: "a" } }, { host: "b" }))).toEqual({ copied: "yes" })
    expect(requestHeaders(adapted({}))).toEqual({ copied: "yes" })
  })
})
