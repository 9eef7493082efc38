/**
 * A gateway whose stdout reader goes away (`npm start | head -1`, a log shipper that exits) keeps
 * serving: the next log write's EPIPE used to be an unhandled 'error' event that ended the process.
 * What it would have written is dropped, and stderr says so once.
 */
import { rmSync } from "node:fs"
import { describe, expect, it } from "vitest"
import { embeddedDataDir } from "../support/engines.ts"
import { startGateway } from "../support/gateway-process.ts"

describe("a gateway whose stdout is closed by its reader", () => {
  it("goes on answering, says once on stderr that its stdout is gone, and stops cleanly", async () => {
    const dir = embeddedDataDir()
    const gw = await startGateway({ GATEWAY_DATA_DIR: dir })
    try {
      gw.child.stdout!.destroy()
      // Each request writes a log line (flushed every 100 ms): the first flush meets the closed pipe.
      for (let i = 0; i < 6; i++) {
        const response = await fetch(`${gw.baseUrl}/v1/models`)
        expect(response.status).toBe(200)
        await new Promise((resolve) => setTimeout(resolve, 100))
      }
      await expect.poll(() => gw.output()).toContain("stdout can no longer be written (EPIPE)")
      expect(gw.child.exitCode).toBeNull()
      expect((await fetch(`${gw.baseUrl}/v1/models`)).status).toBe(200)
    } finally {
      expect(await gw.stop()).toBe(0)
      rmSync(dir, { recursive: true, force: true })
    }
  })
})
