/** The gateway mounted as a fetch-style handler, without its own listener. */
import { rmSync } from "node:fs"
import { describe, expect, it } from "vitest"
import { createWebHandler } from "../../src/index.ts"
import { freshDataDir } from "../support/engines.ts"

describe("createWebHandler", () => {
  it("serves the catalog and authenticated routes through a Web Request handler", async () => {
    const dir = freshDataDir()
    const gateway = createWebHandler({ dataDir: dir, databaseUrl: undefined, adminToken: undefined })
    try {
      const models = await gateway.handler(new Request("http://embedded/v1/models/atlas"))
      expect(models.status).toBe(200)
      expect(((await models.json()) as { id: string }).id).toBe("svc-atlas-1")
      expect(models.headers.get("x-request-id")).toMatch(/^req_/)
      const unauthorized = await gateway.handler(new Request("http://embedded/v1/states", { method: "POST", body: "{}" }))
      expect(unauthorized.status).toBe(401)
      expect(await unauthorized.json()).toMatchObject({ error: { type: "unauthorized" } })
    } finally {
      await gateway.dispose()
      rmSync(dir, { recursive: true, force: true })
    }
  }, 60_000)
})
