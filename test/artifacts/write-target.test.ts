/**
 * Where a parse worker writes a large upload on PostgreSQL (`writeTargetOf`): the gateway's URL, its
 * connection guards, and a connect timeout of the storage timeout unless the URL sets its own.
 */
import { Redacted } from "effect"
import { describe, expect, it } from "vitest"
import { writeTargetOf } from "../../src/artifacts/content-parser.ts"
import { connectionGuards } from "../../src/storage/pg-connection.ts"

const target = (url: string) => writeTargetOf({ kind: "postgres" }, Redacted.make(url), 2, 7_000)()

describe("a parse worker's PostgreSQL target", () => {
  it("connects within the storage timeout, with the pool's guards", () => {
    expect(target("postgres://root@127.0.0.1:5432/test")).toEqual({
      kind: "postgres", url: "postgres://root@127.0.0.1:5432/test", width: 2, maxMessageSize: expect.any(Number),
      guards: connectionGuards(7_000), connectTimeoutMs: 7_000
    })
  })

  it("leaves the connect timeout to the URL when it sets one", () => {
    expect(target("postgres://root@127.0.0.1:5432/test?connect_timeout=3")).not.toHaveProperty("connectTimeoutMs")
    expect(target("postgres://root@127.0.0.1:5432/test?sslmode=disable&connect_timeout=3")).not.toHaveProperty("connectTimeoutMs")
  })
})
