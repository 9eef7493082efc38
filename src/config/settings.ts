/**
 * Process settings from the environment. Read once at start; nothing on the request path parses env.
 */
import { Config, Context, Effect, Layer, type LogLevel, Option, Redacted, Schema, SchemaIssue } from "effect"
import { resolve } from "node:path"

export interface SettingsShape {
  readonly host: string
  readonly port: number
  /** Where the embedded database, the admin token file and the lock file live. */
  readonly dataDir: string
  /** A PostgreSQL URL; absent → the embedded PGlite database under `dataDir`. */
  readonly databaseUrl: Redacted.Redacted<string> | undefined
  readonly redisUrl: string | undefined
  /** Prefix of every Redis key (default `gw:`): gateways that share a prefix share their state. */
  readonly redisPrefix: string
  /** Path of the JSON config file; absent → the built-in simulator catalog. */
  readonly configPath: string | undefined
  readonly adminToken: Redacted.Redacted<string> | undefined
  readonly maxBodyBytes: number
  /** Bytes of request bodies held while they arrive, in all (a key: half); see `http/body-budget.ts`. */
  readonly bodyBytesInFlight: number
  /** Largest artifact content (UTF-8 bytes of `bytes`/`content`); larger uploads get 413. */
  readonly artifactMaxBytes: number
  /** How long a graceful shutdown waits for in-flight requests. */
  readonly shutdownGraceMs: number
  /** The longest a request waits in a capacity queue before a 503 (default 10 minutes). */
  readonly queueMaxWaitMs: number
  /** Interval of SSE keepalives while a streaming request waits for capacity. */
  readonly keepaliveMs: number
  /**
   * How long a waiting stream holds its headers for a slot, so `xsvc-model` can name what serves;
   * past it the stream commits early (without `xsvc-model`) and sends keepalives. 0: commit at once.
   */
  readonly streamHoldMs: number
  /** First retry backoff (doubling: 1, 2, 4, 8 s by default); shorter for tests and demos. */
  readonly retryBaseMs: number
  /** How long an open circuit waits before a half-open probe. */
  readonly circuitCooldownMs: number
  /** After a coordination-store loss, how long unseeded budgets wait before they are rebuilt. */
  readonly allowanceRecoveryFenceMs: number
  /** How often the allowance checks the coordination store's epoch (how soon a loss is noticed). */
  readonly allowanceEpochCheckMs: number
  /** False (GATEWAY_METERING=off): no rate limits, no allowance; usage is still recorded. */
  readonly metering: boolean
  /**
   * How long the request path waits for the database (a key's look-up, a budget's rebuild) before
   * it answers 503 — or, for a key verified shortly before, goes on with what it knew. A stalled
   * database (a partition, a lock, a frozen disk) must not hold requests without end.
   */
  readonly storageTimeoutMs: number
  /**
   * How many usage rows may wait to be written before new calls are refused (503): while the
   * database refuses the ledger's writes (a full disk), memory stays bounded and no call goes
   * unrecorded. ~430 bytes a row.
   */
  readonly ledgerMaxPending: number
  /** The embedded database's page cache (Postgres shared_buffers), MiB; resident from the start. */
  readonly embeddedSharedBuffersMb: number
  /** Room kept back in the data dir for the embedded database on a full disk, MiB (storage/disk-reserve.ts); 0: none. */
  readonly diskReserveMb: number
  /** How long a client may take to send a request's headers (and to start one on a new connection). */
  readonly headersTimeoutMs: number
  /** How long a request body may stall (no bytes arriving) before the connection is closed. */
  readonly bodyIdleTimeoutMs: number
  /**
   * How long an answer may wait on a client that takes none of its written bytes (a stream whose
   * client stopped reading) before the connection is closed, freeing the request's slot and memory.
   */
  readonly sendTimeoutMs: number
  /**
   * Client connections the Node server keeps open at most; a new one past it is closed at once.
   * Undefined: the default, from the process's open-file limit (`open-files.ts`); 0: no cap.
   */
  readonly maxConnections: number | undefined
  /**
   * After this long with no request started or in flight (and a quiet event loop), the main
   * thread's heap is collected once to give memory back (`util/heap-trim.ts`). 0: never.
   */
  readonly idleTrimMs: number
  /** How long stored responses (Responses dialect) are kept, days (fractions allowed). */
  readonly responseRetentionDays: number
  /** How long a dashboard sign-in lasts, from sign-in. */
  readonly dashboardSessionMs: number
  /** Least severe log level written (`GATEWAY_LOG_LEVEL`; default Info: one line per request). */
  readonly logLevel: LogLevel.LogLevel
  /** False (`GATEWAY_METRICS=off`): nothing recorded, `/metrics` answers 404. */
  readonly metrics: boolean
  /** A second listener (same host) serving only `GET /metrics`, without credentials. */
  readonly metricsPort: number | undefined
  /** OTLP/HTTP endpoint (`OTEL_EXPORTER_OTLP_ENDPOINT`); set → traces are exported there. */
  readonly otlpEndpoint: string | undefined
  /** `OTEL_EXPORTER_OTLP_HEADERS` (`k=v,k2=v2`, values percent-encoded), sent with every export. */
  readonly otlpHeaders: Readonly<Record<string, string>>
  /** `OTEL_BSP_SCHEDULE_DELAY` (ms between exports, default 5000; a value that is not a positive number is ignored). */
  readonly otlpExportDelayMs: number | undefined
  /** `OTEL_SERVICE_NAME` (default `svc-gateway`). */
  readonly serviceName: string
  /** How long a run's lease lasts without a heartbeat (a crashed instance's runs resume after it). */
  readonly runLeaseMs: number
  /** Claims of one run before it ends `failed` (`max_attempts`). */
  readonly runMaxAttempts: number
  /** Finished runs (and their logs) are deleted this many days after they finished. */
  readonly runRetentionDays: number
  /** Heartbeat comment interval on an idle run event stream. */
  readonly runSseHeartbeatMs: number
  /** Retries in a row of a run whose step keeps failing retryably, before it ends `failed`. */
  readonly runStepRetries: number
  /** First backoff of those retries (doubling, at most 60 s per wait). */
  readonly runRetryBaseMs: number
  /** Largest upload to `/v1/files`; larger ones get 413. */
  readonly fileMaxBytes: number
  /** How long a batch may take: requests not done by `expires_at` (created + this) end `expired`. */
  readonly batchWindowMs: number
  /** Batch requests one instance executes (or queues for capacity) at once. */
  readonly batchConcurrency: number
  /** How long a batch request's lease lasts without a heartbeat. */
  readonly batchLeaseMs: number
  /** How often an instance looks for batch requests to claim. */
  readonly batchPollMs: number
  /** Takeovers of one batch request (its instance died) before it ends `errored`. */
  readonly batchMaxTakeovers: number
  /**
   * An environment value the config file names (a placement's `apiKeyEnv`), as read at start; a
   * program embedding the gateway may answer them itself instead of its process environment. A
   * function, not a record, so printing the settings never prints the environment's secrets.
   */
  readonly lookupEnv: (name: string) => string | undefined
}

/** Default of `GATEWAY_BODY_IDLE_TIMEOUT_MS`. */
export const DEFAULT_BODY_IDLE_TIMEOUT_MS = 30_000

const optionalString = (name: string) =>
  Config.String(name).pipe(Config.option, Config.map((o) => Option.getOrUndefined(Option.filter(o, (s) => s.trim() !== ""))))

/** Whether `text` is a URL with one of `schemes` (`redis`, `postgres`…). */
const hasScheme = (text: string, schemes: ReadonlyArray<string>) =>
  URL.canParse(text) && schemes.includes(new URL(text).protocol.slice(0, -1))

/**
 * An optional URL setting (empty: absent) that must have one of `schemes`, or be an absolute path
 * when `socketPath` (a Unix socket). Refused with what was expected, never with the value: it may
 * hold a password. An `http://` Redis URL used to start a gateway that was never ready.
 */
const optionalUrl = (name: string, schemes: ReadonlyArray<string>, socketPath: boolean) => {
  // "an http://" (said "aitch"), "a redis://".
  const article = /^[aeiouh]/.test(schemes[0] ?? "") ? "an" : "a"
  const expected = `Expected ${article} ${schemes.map((scheme) => `${scheme}://`).join(" or ")} URL${socketPath ? " or the absolute path of a Unix socket" : ""}`
  const valid = Schema.makeFilter((text: string) => text.trim() === "" || hasScheme(text.trim(), schemes) || (socketPath && text.trim().startsWith("/")) || expected)
  return Config.schema(Schema.String.check(valid), name).pipe(
    Config.option,
    Config.map((o) => Option.getOrUndefined(Option.map(Option.filter(o, (text) => text.trim() !== ""), (text) => text.trim())))
  )
}

/** A header value as OTEL_EXPORTER_OTLP_HEADERS encodes it; one that is not valid percent-encoding as written. */
const percentDecoded = (value: string) => {
  try {
    return decodeURIComponent(value)
  } catch {
    return value
  }
}

/**
 * A setting that does not parse, for the command line: `invalid setting GATEWAY_X: Expected …`
 * (Effect prints a ConfigError as `ConfigError(SchemaError(…))`, the variable on a line of its own).
 */
export const settingErrorMessage = (error: Config.ConfigError): string => {
  const cause = error.cause
  if (Schema.isSchemaError(cause) && cause.issue._tag === "Pointer") {
    return `invalid setting ${cause.issue.path.join(".")}: ${SchemaIssue.makeFormatterDefault()(cause.issue.issue)}`
  }
  return `invalid setting: ${cause.message}`
}

/** Node's timers and socket timeouts wait at most 2^31 − 1 ms; asked for longer, they fire after 1 ms. */
const MAX_TIMER_MS = 2 ** 31 - 1

/** A numeric setting: its variable, its default, and the values it may take. */
interface NumberRule {
  readonly env: string
  readonly fallback: number
  readonly schema: Schema.Codec<number, number>
}

/**
 * A whole number within its range. The smallest value is 1 where 0 would spin or refuse
 * everything (an interval, a timeout, a size, a count of workers), 0 where 0 has a documented
 * meaning (at once, never, off).
 */
const wholeNumber = (env: string, fallback: number, min: 0 | 1, max: number = Number.MAX_SAFE_INTEGER): NumberRule =>
  ({ env, fallback, schema: Schema.Int.check(Schema.isBetween({ minimum: min, maximum: max })) })

/** A duration in milliseconds (`wholeNumber`), at most what a timer can wait. */
const milliseconds = (env: string, fallback: number, min: 0 | 1): NumberRule => wholeNumber(env, fallback, min, MAX_TIMER_MS)

/**
 * The one rule for every numeric setting, from the environment (`settingsConfig`) or given by an
 * embedder (`Settings.layerWith`): a value outside its range stops the start, naming the variable
 * or the option (`invalid setting GATEWAY_KEEPALIVE_MS: Expected a value between 1 and 2147483647`).
 */
const NUMBER_RULES = {
  // Config.Port refuses 0; 0 asks the OS for a free port (documented, and what tests use).
  port: wholeNumber("PORT", 8080, 0, 65535),
  maxBodyBytes: wholeNumber("GATEWAY_MAX_BODY_BYTES", 32 * 1024 * 1024, 1),
  bodyBytesInFlight: wholeNumber("GATEWAY_BODY_BYTES_IN_FLIGHT", 256 * 1024 * 1024, 1),
  artifactMaxBytes: wholeNumber("GATEWAY_ARTIFACT_MAX_BYTES", 16 * 1024 * 1024, 1),
  shutdownGraceMs: milliseconds("GATEWAY_SHUTDOWN_GRACE_MS", 15_000, 0),
  queueMaxWaitMs: milliseconds("GATEWAY_QUEUE_MAX_WAIT_MS", 10 * 60_000, 0),
  keepaliveMs: milliseconds("GATEWAY_KEEPALIVE_MS", 10_000, 1),
  streamHoldMs: milliseconds("GATEWAY_STREAM_HOLD_MS", 5_000, 0),
  retryBaseMs: milliseconds("GATEWAY_RETRY_BASE_MS", 1_000, 0),
  circuitCooldownMs: milliseconds("GATEWAY_CIRCUIT_COOLDOWN_MS", 30_000, 0),
  allowanceRecoveryFenceMs: milliseconds("GATEWAY_ALLOWANCE_RECOVERY_FENCE_MS", 5_000, 0),
  allowanceEpochCheckMs: milliseconds("GATEWAY_ALLOWANCE_EPOCH_CHECK_MS", 1_000, 1),
  storageTimeoutMs: milliseconds("GATEWAY_STORAGE_TIMEOUT_MS", 10_000, 1),
  ledgerMaxPending: wholeNumber("GATEWAY_LEDGER_MAX_PENDING", 100_000, 1),
  embeddedSharedBuffersMb: wholeNumber("GATEWAY_EMBEDDED_SHARED_BUFFERS_MB", 8, 1, 4096),
  diskReserveMb: wholeNumber("GATEWAY_DISK_RESERVE_MB", 32, 0, 65_536),
  headersTimeoutMs: milliseconds("GATEWAY_HEADERS_TIMEOUT_MS", 15_000, 1),
  bodyIdleTimeoutMs: milliseconds("GATEWAY_BODY_IDLE_TIMEOUT_MS", DEFAULT_BODY_IDLE_TIMEOUT_MS, 1),
  // nginx's send_timeout default: a client that takes nothing for a minute is not coming back.
  sendTimeoutMs: milliseconds("GATEWAY_SEND_TIMEOUT_MS", 60_000, 1),
  idleTrimMs: milliseconds("GATEWAY_IDLE_TRIM_MS", 60_000, 0),
  // Fractions allowed (a test keeps responses for minutes).
  responseRetentionDays: { env: "GATEWAY_RESPONSE_RETENTION_DAYS", fallback: 30, schema: Schema.Finite.check(Schema.isGreaterThan(0)) },
  dashboardSessionMs: milliseconds("GATEWAY_DASHBOARD_SESSION_MS", 12 * 60 * 60_000, 1),
  runLeaseMs: milliseconds("GATEWAY_RUN_LEASE_MS", 15_000, 1),
  runMaxAttempts: wholeNumber("GATEWAY_RUN_MAX_ATTEMPTS", 5, 1),
  runRetentionDays: wholeNumber("GATEWAY_RUN_RETENTION_DAYS", 30, 1),
  runSseHeartbeatMs: milliseconds("GATEWAY_RUN_SSE_HEARTBEAT_MS", 15_000, 1),
  runStepRetries: wholeNumber("GATEWAY_RUN_STEP_RETRIES", 10, 0),
  runRetryBaseMs: milliseconds("GATEWAY_RUN_RETRY_BASE_MS", 1_000, 0),
  fileMaxBytes: wholeNumber("GATEWAY_FILE_MAX_BYTES", 32 * 1024 * 1024, 1),
  batchWindowMs: milliseconds("GATEWAY_BATCH_WINDOW_MS", 24 * 3_600_000, 1),
  batchConcurrency: wholeNumber("GATEWAY_BATCH_CONCURRENCY", 32, 1),
  batchLeaseMs: milliseconds("GATEWAY_BATCH_LEASE_MS", 15_000, 1),
  batchPollMs: milliseconds("GATEWAY_BATCH_POLL_MS", 500, 1),
  batchMaxTakeovers: wholeNumber("GATEWAY_BATCH_MAX_TAKEOVERS", 5, 0)
} satisfies { readonly [K in keyof SettingsShape]?: NumberRule }

type NumberSetting = keyof typeof NUMBER_RULES
const numberSettings = Object.keys(NUMBER_RULES) as ReadonlyArray<NumberSetting>

/** Each numeric setting read from its variable under its rule. */
const numberConfigs = Object.fromEntries(numberSettings.map((key) => {
  const { env, fallback, schema } = NUMBER_RULES[key]
  return [key, Config.schema(schema, env).pipe(Config.withDefault(fallback))]
})) as { readonly [K in NumberSetting]: Config.Config<number> }

/** An embedder's numeric options checked under the same rules; a bad one fails as a bad variable would, named by its option. */
const checkNumbers = (overrides: Partial<SettingsShape>): Effect.Effect<void, Config.ConfigError> =>
  Effect.forEach(numberSettings, (key) => {
    const value = overrides[key]
    return value === undefined ? Effect.void : Schema.decodeUnknownEffect(NUMBER_RULES[key].schema)(value).pipe(
      Effect.mapError((error) => new Config.ConfigError(new Schema.SchemaError(new SchemaIssue.Pointer([key], error.issue))))
    )
  }, { discard: true })

export const settingsConfig = Config.all({
  ...numberConfigs,
  host: Config.String("HOST").pipe(Config.withDefault("127.0.0.1")),
  dataDir: Config.String("GATEWAY_DATA_DIR").pipe(Config.withDefault("./.data"), Config.map((d) => resolve(d))),
  databaseUrl: optionalUrl("DATABASE_URL", ["postgres", "postgresql"], false).pipe(Config.map((u) => (u === undefined ? undefined : Redacted.make(u)))),
  redisUrl: optionalUrl("REDIS_URL", ["redis", "rediss"], true),
  redisPrefix: Config.String("GATEWAY_REDIS_PREFIX").pipe(Config.withDefault("gw:")),
  configPath: optionalString("GATEWAY_CONFIG"),
  adminToken: optionalString("GATEWAY_ADMIN_TOKEN").pipe(Config.map((t) => (t === undefined ? undefined : Redacted.make(t)))),
  metering: Config.Literals(["on", "off"], "GATEWAY_METERING").pipe(Config.withDefault("on" as const), Config.map((v) => v === "on")),
  maxConnections: Config.schema(Schema.Int.check(Schema.isGreaterThanOrEqualTo(0)), "GATEWAY_MAX_CONNECTIONS").pipe(
    Config.option,
    Config.map(Option.getOrUndefined)
  ),
  logLevel: Config.Literals(["trace", "debug", "info", "warn", "error", "fatal", "none"], "GATEWAY_LOG_LEVEL").pipe(
    Config.withDefault("info" as const),
    Config.map((level): LogLevel.LogLevel => (level === "warn" ? "Warn" : (level[0].toUpperCase() + level.slice(1)) as LogLevel.LogLevel))
  ),
  metrics: Config.Literals(["on", "off"], "GATEWAY_METRICS").pipe(Config.withDefault("on" as const), Config.map((v) => v === "on")),
  metricsPort: Config.schema(Schema.Int.check(Schema.isBetween({ minimum: 0, maximum: 65535 })), "GATEWAY_METRICS_PORT").pipe(
    Config.option,
    Config.map(Option.getOrUndefined)
  ),
  otlpEndpoint: optionalUrl("OTEL_EXPORTER_OTLP_ENDPOINT", ["http", "https"], false),
  otlpHeaders: optionalString("OTEL_EXPORTER_OTLP_HEADERS").pipe(Config.map((text) =>
    Object.fromEntries((text ?? "").split(",").flatMap((pair) => {
      const at = pair.indexOf("=")
      return at <= 0 ? [] : [[pair.slice(0, at).trim(), percentDecoded(pair.slice(at + 1).trim())]]
    })))),
  otlpExportDelayMs: optionalString("OTEL_BSP_SCHEDULE_DELAY").pipe(Config.map((text) => {
    const delay = Number(text)
    return Number.isFinite(delay) && delay > 0 ? delay : undefined
  })),
  serviceName: Config.String("OTEL_SERVICE_NAME").pipe(Config.withDefault("svc-gateway")),
  // Which names the config file refers to is known only once it is loaded: keep them all.
  // (read when the settings are, not when this module loads)
  lookupEnv: Config.succeed(undefined).pipe(Config.map(() => {
    const environment: Readonly<Record<string, string | undefined>> = { ...process.env }
    return (name: string) => environment[name]
  }))
})

export class Settings extends Context.Service<Settings, SettingsShape>()("gateway/config/Settings") {
  /** Settings from the process environment. */
  static readonly layer = Layer.effect(Settings, Effect.gen(function*() {
    return Settings.of(yield* settingsConfig)
  }))
  /** Fixed settings, for tests and for programs that embed the gateway. */
  static readonly layerWith = (overrides: Partial<SettingsShape>) =>
    Layer.effect(Settings, Effect.gen(function*() {
      yield* checkNumbers(overrides)
      return Settings.of({ ...(yield* settingsConfig), ...overrides })
    }))
}
