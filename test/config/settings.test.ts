/** Settings read from the environment through Effect's ConfigProvider (never `process.env` directly). */
import { Config, ConfigProvider, Effect, Layer } from "effect"
import { describe, expect, it } from "vitest"
import { settingErrorMessage, Settings, settingsConfig } from "../../src/config/settings.ts"

const settingsFrom = (env: Record<string, string>) =>
  Effect.runPromise(settingsConfig.parse(ConfigProvider.fromEnv({ env })))

/** The message a start would print for these variables, or "ok". */
const refusal = (env: Record<string, string>) =>
  Effect.runPromise(settingsConfig.parse(ConfigProvider.fromEnv({ env })).pipe(
    Effect.match({ onSuccess: () => "ok", onFailure: settingErrorMessage })
  ))

const MAX_TIMER = "2147483647"

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

  it("refuses a numeric setting outside its range, naming the variable: 0 where it would spin or refuse everything, past a timer's reach, fractions, negatives", async () => {
    // An interval of 0 ms was a busy loop (the allowance's epoch check took a whole core, idle).
    for (const name of ["GATEWAY_KEEPALIVE_MS", "GATEWAY_ALLOWANCE_EPOCH_CHECK_MS", "GATEWAY_BATCH_POLL_MS", "GATEWAY_RUN_SSE_HEARTBEAT_MS", "GATEWAY_HEADERS_TIMEOUT_MS"]) {
      expect(await refusal({ [name]: "0" })).toBe(`invalid setting ${name}: Expected a value between 1 and ${MAX_TIMER}`)
      // Node's timers fire after 1 ms when asked for longer than they can wait.
      expect(await refusal({ [name]: "2147483648" })).toBe(`invalid setting ${name}: Expected a value between 1 and ${MAX_TIMER}`)
      expect(await refusal({ [name]: MAX_TIMER })).toBe("ok")
    }
    expect(await refusal({ GATEWAY_BATCH_CONCURRENCY: "0" })).toBe(`invalid setting GATEWAY_BATCH_CONCURRENCY: Expected a value between 1 and ${Number.MAX_SAFE_INTEGER}`)
    expect(await refusal({ GATEWAY_MAX_BODY_BYTES: "-5" })).toContain("invalid setting GATEWAY_MAX_BODY_BYTES: Expected a value between 1 and")
    expect(await refusal({ GATEWAY_RETRY_BASE_MS: "-1" })).toBe(`invalid setting GATEWAY_RETRY_BASE_MS: Expected a value between 0 and ${MAX_TIMER}`)
    expect(await refusal({ GATEWAY_SHUTDOWN_GRACE_MS: "1.5" })).toBe("invalid setting GATEWAY_SHUTDOWN_GRACE_MS: Expected an integer")
    expect(await refusal({ GATEWAY_QUEUE_MAX_WAIT_MS: "soon" })).toBe("invalid setting GATEWAY_QUEUE_MAX_WAIT_MS: Expected a string representing a finite number")
    expect(await refusal({ GATEWAY_RESPONSE_RETENTION_DAYS: "0" })).toBe("invalid setting GATEWAY_RESPONSE_RETENTION_DAYS: Expected a value greater than 0")
    expect(await refusal({ PORT: "65536" })).toBe("invalid setting PORT: Expected a value between 0 and 65535")
  })

  it("takes 0 where it has a meaning (at once, never, off), and fractions of a day for stored responses", async () => {
    const settings = await settingsFrom({
      GATEWAY_STREAM_HOLD_MS: "0", GATEWAY_IDLE_TRIM_MS: "0", GATEWAY_QUEUE_MAX_WAIT_MS: "0", GATEWAY_SHUTDOWN_GRACE_MS: "0",
      GATEWAY_RETRY_BASE_MS: "0", GATEWAY_RUN_STEP_RETRIES: "0", GATEWAY_BATCH_MAX_TAKEOVERS: "0", GATEWAY_RESPONSE_RETENTION_DAYS: "0.25", PORT: "0"
    })
    expect(settings).toMatchObject({ streamHoldMs: 0, idleTrimMs: 0, queueMaxWaitMs: 0, shutdownGraceMs: 0, retryBaseMs: 0, runStepRetries: 0, batchMaxTakeovers: 0, responseRetentionDays: 0.25, port: 0 })
  })

  it("checks an embedder's options by the same rules, naming the option", async () => {
    const build = (overrides: Parameters<typeof Settings.layerWith>[0]) =>
      Effect.runPromise(Effect.match(Layer.build(Settings.layerWith(overrides)).pipe(Effect.scoped, Effect.provide(ConfigProvider.layer(ConfigProvider.fromEnv({ env: {} })))), {
        onSuccess: () => "ok",
        onFailure: (error) => (error instanceof Config.ConfigError ? settingErrorMessage(error) : String(error))
      }))
    expect(await build({ keepaliveMs: 0 })).toBe(`invalid setting keepaliveMs: Expected a value between 1 and ${MAX_TIMER}`)
    expect(await build({ batchConcurrency: 2.5 })).toBe("invalid setting batchConcurrency: Expected an integer")
    expect(await build({ keepaliveMs: 50, streamHoldMs: 0 })).toBe("ok")
  })

  it("refuses a Redis, PostgreSQL or OTLP URL of another kind, without printing it (it may hold a password); empty is absent", async () => {
    expect(await refusal({ REDIS_URL: "http://user:secret@cache:6379" }))
      .toBe("invalid setting REDIS_URL: Expected a redis:// or rediss:// URL or the absolute path of a Unix socket")
    expect(await refusal({ DATABASE_URL: "mysql://root:secret@db/test" })).toBe("invalid setting DATABASE_URL: Expected a postgres:// or postgresql:// URL")
    expect(await refusal({ DATABASE_URL: "secret" })).toBe("invalid setting DATABASE_URL: Expected a postgres:// or postgresql:// URL")
    const settings = await settingsFrom({ REDIS_URL: " rediss://cache:6380 ", DATABASE_URL: "postgresql:///test?host=/var/run/postgresql" })
    expect(settings.redisUrl).toBe("rediss://cache:6380")
    expect(settings.databaseUrl).toBeDefined()
    expect((await settingsFrom({ REDIS_URL: "/run/redis/redis.sock" })).redisUrl).toBe("/run/redis/redis.sock")
    // An endpoint that is no URL used to start a gateway that exported nothing and said nothing.
    expect(await refusal({ OTEL_EXPORTER_OTLP_ENDPOINT: "collector:4318" })).toBe("invalid setting OTEL_EXPORTER_OTLP_ENDPOINT: Expected an http:// or https:// URL")
    expect((await settingsFrom({ OTEL_EXPORTER_OTLP_ENDPOINT: "https://otlp.example:4318/" })).otlpEndpoint).toBe("https://otlp.example:4318/")
    const empty = await settingsFrom({ REDIS_URL: "  ", DATABASE_URL: "" })
    expect([empty.redisUrl, empty.databaseUrl]).toEqual([undefined, undefined])
  })
})
