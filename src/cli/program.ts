/**
 * The `gateway` command's program (`src/main.ts` starts it): `serve` (default), `keys`, `migrate`,
 * `simulate`. Flags override the environment.
 */
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import { Cause, Config, Console, Effect, Exit, Layer, Schema } from "effect"
import { flushCompileCache } from "node:module"
import { parseArgs } from "node:util"
import { settingErrorMessage, Settings, type SettingsShape } from "../config/settings.ts"
import { commandLine } from "./command-line.ts"
import { KEYS_HELP, MAIN_HELP, MIGRATE_HELP, SERVE_HELP, SIMULATE_HELP, isHelpCommand, unknownCommandMessage } from "./help.ts"

const COMMON_OPTIONS = {
  help: { type: "boolean", short: "h" },
  config: { type: "string" },
  "data-dir": { type: "string" }
} as const

/** Settings from the environment with the command line's overrides on top. */
const settingsFrom = (values: { host?: string | undefined; port?: string | undefined; config?: string | undefined; "data-dir"?: string | undefined }) => {
  const overrides: Partial<SettingsShape> = {}
  if (values.host !== undefined) Object.assign(overrides, { host: values.host })
  if (values.port !== undefined) Object.assign(overrides, { port: Number(values.port) })
  if (values.config !== undefined) Object.assign(overrides, { configPath: values.config })
  if (values["data-dir"] !== undefined) Object.assign(overrides, { dataDir: values["data-dir"] })
  return Settings.layerWith(overrides)
}

/** The command failed and already printed why: the process exits 1 with nothing more to say. */
class ExitWithError extends Schema.TaggedError<ExitWithError>()("ExitWithError", {}) {}

const fail = (message: string) => Effect.andThen(Console.error(message), Effect.fail(new ExitWithError()))

/** A command's module, imported only when that command runs (its compiled code cached at once: `src/main.ts`). */
const load = <M, A, E>(module: () => Promise<M>, use: (m: M) => Effect.Effect<A, E>) =>
  Effect.flatMap(Effect.promise(async () => {
    const loaded = await module()
    flushCompileCache()
    return loaded
  }), use)

/**
 * Runs `command` with the embedded database opened early: the database's thread (started by
 * `main.ts`) opens it with these settings while the command's modules load
 * (`storage/embedded-database.ts` `openEarly`), and once the command is over, what its layers did
 * not take over is closed cleanly (`closeEarly`: the command failed before them, e.g. on a config
 * mistake). Anything in the way (settings that do not parse, a lock held elsewhere) is left for
 * the layers to report.
 */
const withDatabaseOpenedEarly = <A, E>(settings: Layer.Layer<Settings, unknown>, command: Effect.Effect<A, E>) =>
  Effect.gen(function*() {
    const { databaseUrl, dataDir, embeddedSharedBuffersMb } = yield* Settings
    if (databaseUrl !== undefined) return undefined
    const { openEarly, closeEarly } = yield* Effect.promise(() => import("../storage/embedded-database.ts"))
    // (Even when nothing was sent: the data dir's lock may have been taken.)
    yield* Effect.try(() => openEarly({ dataDir, sharedBuffersMb: embeddedSharedBuffersMb })).pipe(Effect.ignore)
    return closeEarly
  }).pipe(
    Effect.provide(settings),
    Effect.catchCause(() => Effect.succeed(undefined)),
    Effect.flatMap((closeEarly) => (closeEarly === undefined ? command : Effect.ensuring(command, Effect.promise(closeEarly))))
  )

const run = (argv: ReadonlyArray<string>): Effect.Effect<void, unknown> => {
  const { command, rest } = commandLine(argv)
  if (isHelpCommand(command)) return Console.log(MAIN_HELP)
  switch (command) {
    case "serve": {
      const { values } = parseArgs({ args: [...rest], options: { ...COMMON_OPTIONS, host: { type: "string" }, port: { type: "string" } } })
      if (values.help) return Console.log(SERVE_HELP)
      const badPort = values.port === undefined ? undefined : portMistake(values.port)
      if (badPort !== undefined) return fail(badPort)
      const settings = settingsFrom(values)
      return withDatabaseOpenedEarly(settings, load(() => import("../gateway.ts"), ({ ServerLive }) => Layer.launch(ServerLive.pipe(Layer.provide(settings)))))
    }
    case "keys": {
      const { values, positionals } = parseArgs({
        args: [...rest],
        allowPositionals: true,
        options: { ...COMMON_OPTIONS, name: { type: "string" }, plan: { type: "string" }, surfaces: { type: "string" }, models: { type: "string" }, json: { type: "boolean" } }
      })
      if (values.help || positionals.length === 0) return Console.log(KEYS_HELP)
      const settings = settingsFrom(values)
      return withDatabaseOpenedEarly(settings, load(() => import("./keys-command.ts"), ({ keysCommand }) => keysCommand(positionals, values).pipe(Effect.provide(settings))))
    }
    case "migrate": {
      const { values } = parseArgs({ args: [...rest], options: COMMON_OPTIONS })
      if (values.help) return Console.log(MIGRATE_HELP)
      const settings = settingsFrom(values)
      return withDatabaseOpenedEarly(settings, load(() => import("./migrate-command.ts"), ({ migrateCommand }) => migrateCommand.pipe(Effect.provide(settings))))
    }
    case "simulate": {
      const { values } = parseArgs({
        args: [...rest],
        options: {
          help: { type: "boolean", short: "h" }, host: { type: "string" }, port: { type: "string" },
          "ttft-ms": { type: "string" }, "tokens-per-second": { type: "string" }, "api-key": { type: "string" }
        }
      })
      if (values.help) return Console.log(SIMULATE_HELP)
      const numbers = { port: values.port ?? "9090", "ttft-ms": values["ttft-ms"] ?? "0", "tokens-per-second": values["tokens-per-second"] ?? "0" }
      const badPort = portMistake(numbers.port)
      if (badPort !== undefined) return fail(badPort)
      for (const [flag, value] of Object.entries(numbers)) {
        if (!/^\d+(\.\d+)?$/.test(value)) return fail(`--${flag}: expected a number, got ${value}`)
      }
      return load(() => import("../simulate/server.ts"), ({ simulateServer }) => Layer.launch(simulateServer({
        host: values.host ?? "127.0.0.1",
        port: Number(numbers.port),
        ttftMs: Number(numbers["ttft-ms"]),
        tokensPerSecond: Number(numbers["tokens-per-second"]),
        apiKey: values["api-key"]
      })))
    }
    default:
      return fail(unknownCommandMessage(command))
  }
}

/** What is wrong with a `--port` value, if anything: a whole number from 0 (any free port) to 65535. */
const portMistake = (value: string): string | undefined =>
  /^\d+$/.test(value) && Number(value) <= 65535 ? undefined : `--port: expected a whole number from 0 to 65535, got ${value}`

/**
 * What a failed command prints after `gateway: `: a bad setting by its name, a server that could
 * not listen by why (the platform's ServeError carries that only as its cause: a taken port printed
 * `gateway: ` and nothing more), else the error's own message.
 */
const failureMessage = (error: unknown): string => {
  if (error instanceof Config.ConfigError) return settingErrorMessage(error)
  if (!(error instanceof Error)) return String(error)
  if ((error as { readonly _tag?: string })._tag === "ServeError") return `cannot listen: ${messagesOf(error.cause) || "the server did not start"}`
  return messagesOf(error) || error.name
}

/**
 * The messages down a chain of causes, each once: `PgConnection: Failed to connect` alone did not
 * say that the database does not exist, the role is unknown or nothing listens on the port.
 */
const messagesOf = (cause: unknown): string => {
  const messages: Array<string> = []
  for (let depth = 0; depth < 5 && typeof cause === "object" && cause !== null; depth++) {
    const message = (cause as { readonly message?: unknown }).message
    if (typeof message === "string" && message !== "" && !messages.includes(message)) messages.push(message)
    cause = (cause as { readonly cause?: unknown }).cause
  }
  return messages.join(": ")
}

const program = Effect.suspend(() => run(process.argv.slice(2))).pipe(
  Effect.catch((error: unknown) => (error instanceof ExitWithError ? Effect.fail(error) : fail(`gateway: ${failureMessage(error)}`))),
  Effect.catchDefect((defect) => fail(`gateway: ${failureMessage(defect)}`))
)

NodeRuntime.runMain(program, {
  disableErrorReporting: true,
  // SIGTERM/SIGINT interrupt the program; a graceful stop after them is a success (exit 0).
  teardown: (exit, onExit) => onExit(Exit.isSuccess(exit) || Cause.hasInterruptsOnly(exit.cause) ? 0 : 1)
})
