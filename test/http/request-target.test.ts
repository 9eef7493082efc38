/**
 * `requestTarget` reads a request's path and query as `new URL(target, base)` does, for every
 * target, with a shortcut for plain paths: the router, the 404 shape and handlers' query reads all
 * see what they saw through `new URL`.
 */
import fc from "fast-check"
import { describe, expect, it } from "vitest"
import { requestTarget } from "../../src/http/route.ts"

/** What `new URL` reads; a target it cannot read at all (`//`) is its path with no query, which no route has. */
const viaUrl = (target: string) => {
  try {
    const url = new URL(target, "http://gateway")
    return { pathname: url.pathname, query: [...url.searchParams] }
  } catch {
    return { pathname: target.split("?")[0], query: [] }
  }
}
const viaTarget = (target: string) => {
  const read = requestTarget(target)
  return { pathname: read.pathname, query: [...read.searchParams] }
}

describe("requestTarget", () => {
  it.each([
    "/",
    "/v1/chat/completions",
    "/v1/chat/completions/",
    "/v1/files/file-abc.jsonl/content",
    "/v1/states/st_1:append",
    "/v1/batches?after=batch_1&limit=2",
    "/v1/batches?after=a%20b+c&x=%E2%9C%93&flag",
    "/v1/chat/completions/../../admin/keys",
    "/v1/./chat/completions",
    "/v1/%2e%2e/admin/keys",
    "/v1/%2E/x",
    "//evil.example/admin/keys",
    "//",
    "//?x=1",
    "/v1//chat/completions",
    "/v1/chat completions",
    "/v1/responses/resp_1#frag",
    "/v1/responses/resp_1?x=1#frag",
    "/v1/ünïcode/ø",
    "/.hidden",
    "/v1/a\\b",
    "/? ",
    "/?%2E%ü",
    "/?ü%%20",
    "/v1/batches?after=x\t"
  ])("reads %s as new URL does", (target) => {
    expect(viaTarget(target)).toEqual(viaUrl(target))
  })

  it("agrees with new URL on generated targets", () => {
    const piece = fc.constantFrom("/", ".", "..", "%2e", "%2E", "?", "#", "&", "=", "+", "%20", " ", "\\", ":", "~", "-", "_", "v1", "chat", "ü", "%", "\t", "\n", "\u0000", "\ud800", "'", "<")
    fc.assert(
      fc.property(fc.array(piece, { maxLength: 12 }), (pieces) => {
        const target = `/${pieces.join("")}`
        expect(viaTarget(target)).toEqual(viaUrl(target))
      }),
      { numRuns: 20_000 }
    )
  })

  it("takes a plain path as it is, with its query", () => {
    const read = requestTarget("/v1/batches?after=batch_1")
    expect(read.pathname).toBe("/v1/batches")
    expect(read.searchParams.get("after")).toBe("batch_1")
  })
})
