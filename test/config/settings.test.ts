/** Settings read from the environment through Effect's ConfigProvider (never `process.env` directly). */
import { ConfigProvider, Effect } from "effect"
import { describe, expect, it } from "vitest"
import { settingsConfig } from "../../src/config/settings.ts"

const settingsFrom = (env: Record<string, string>) =>
  Effect.runPromise(settingsConfig.parse(ConfigProvider.fromEnv({ env })))

describe("settings from the environment", () => {
  it("reads the OTLP exporter's headers (percent-decoded) and export delay", async () => {
    const settings = await settingsFrom({
      OTEL_EXPORTER_OTLP_HEADERS: "api-key=abc%3D%3D, x-tenant = acme ,novalue,=nokey",
      OTEL_BSP_SCHEDULE_DELAY: "250"
    })
    expect(settings.otlpHeaders).toEqual({ "api-key": "abc==", "x-tenant": "acme" })
    expect(settings.otlpExportDelayMs).toBe(250)
  })

  it("keeps a header value that is not valid percent-encoding as written, and ignores a delay that is not a positive number", async () => {
    const settings = await settingsFrom({ OTEL_EXPORTER_OTLP_HEADERS: "k=100%", OTEL_BSP_SCHEDULE_DELAY: "soon" })
    expect(settings.otlpHeaders).toEqual({ k: "100%" })
    expect(settings.otlpExportDelayMs).toBeUndefined()
    const zero = await settingsFrom({ OTEL_BSP_SCHEDULE_DELAY: "0" })
    expect(zero.otlpExportDelayMs).toBeUndefined()
    expect(zero.otlpHeaders).toEqual({})
  })

  it("takes what the given provider holds, not the process environment", async () => {
    const settings = await settingsFrom({ GATEWAY_DATA_DIR: "/tmp/elsewhere", PORT: "0", GATEWAY_METERING: "off" })
    expect(settings).toMatchObject({ dataDir: "/tmp/elsewhere", port: 0, metering: false, host: "127.0.0.1" })
    expect(settings.lookupEnv("PATH")).toBe(process.env.PATH) // apiKeyEnv lookups: the process's, unless overridden
  })
})
