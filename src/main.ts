#!/usr/bin/env node
/**
 * The `gateway` command: `serve` (default), `keys`, `migrate`. Flags override the environment.
 * Run through npm (`npm start`, `npm run gateway -- keys list`) so Node 24 from node_modules is used.
 */
import { NodeRuntime } from "@effect/platform-node"
import { Cause, Console, Effect, Exit, Layer, Schema } from "effect"
import { parseArgs } from "node:util"
import { Settings, type SettingsShape } from "./config/settings.ts"
import { ServerLive } from "./gateway.ts"
import { keysCommand, KEYS_HELP } from "./cli/keys-command.ts"
import { migrateCommand, MIGRATE_HELP } from "./cli/migrate-command.ts"
import { simulateServer } from "./simulate/server.ts"

const MAIN_HELP = `gateway — model gateway and actor runtime

Usage: gateway <command> [options]

Commands:
  serve      run the HTTP gateway (default)
  keys       create, list and revoke API keys in the database (server stopped)
  migrate    apply database migrations and exit
  simulate   run the simulator as a standalone OpenAI/Anthropic-compatible upstream

Run "gateway <command> --help" for a command's options.
Environment: HOST, PORT, GATEWAY_DATA_DIR, DATABASE_URL, REDIS_URL, GATEWAY_CONFIG,
GATEWAY_ADMIN_TOKEN, GATEWAY_MAX_BODY_BYTES, GATEWAY_SHUTDOWN_GRACE_MS (see README).`

const SERVE_HELP = `Usage: gateway serve [options]

Runs the gateway. With no DATABASE_URL it keeps everything in an embedded database under the
data dir; on the first start it prints one API key and creates an admin token.

Options:
  --host <addr>       listen address (env HOST, default 127.0.0.1)
  --port <n>          listen port (env PORT, default 8080; 0 picks a free port)
  --config <file>     JSON config file (env GATEWAY_CONFIG, default: built-in simulator catalog)
  --data-dir <dir>    data directory (env GATEWAY_DATA_DIR, default ./.data)
  -h, --help          show this help`

const SIMULATE_HELP = `Usage: gateway simulate [options]

Serves the simulator backend over HTTP in the upstream wire formats: POST /v1/messages (Anthropic),
POST /v1/chat/completions and /v1/embeddings (OpenAI). Any model name is accepted.
POST /_simulator/faults {mode: none|error|hang|slow|break-mid-stream, status?, rate?} injects faults.

Options:
  --host <addr>                 listen address (default 127.0.0.1)
  --port <n>                    listen port (default 9090; 0 picks a free port)
  --ttft-ms <n>                 delay before the first token (default 0)
  --tokens-per-second <n>       output pacing (default 0 = as fast as possible)
  --api-key <key>               require this key (x-api-key or Bearer); default: accept any
  -h, --help                    show this help`

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

const run = (argv: ReadonlyArray<string>): Effect.Effect<void, unknown> => {
  const [command = "serve", ...rest] = argv[0]?.startsWith("-") && argv[0] !== "-h" && argv[0] !== "--help" ? ["serve", ...argv] : argv
  if (command === "-h" || command === "--help" || command === "help") return Console.log(MAIN_HELP)
  switch (command) {
    case "serve": {
      const { values } = parseArgs({ args: [...rest], options: { ...COMMON_OPTIONS, host: { type: "string" }, port: { type: "string" } } })
      if (values.help) return Console.log(SERVE_HELP)
      if (values.port !== undefined && !/^\d+$/.test(values.port)) return fail(`--port: expected a number, got ${values.port}`)
      return Layer.launch(ServerLive.pipe(Layer.provide(settingsFrom(values))))
    }
    case "keys": {
      const { values, positionals } = parseArgs({
        args: [...rest],
        allowPositionals: true,
        options: { ...COMMON_OPTIONS, name: { type: "string" }, plan: { type: "string" }, surfaces: { type: "string" }, models: { type: "string" }, json: { type: "boolean" } }
      })
      if (values.help || positionals.length === 0) return Console.log(KEYS_HELP)
      return keysCommand(positionals, values).pipe(Effect.provide(settingsFrom(values)))
    }
    case "migrate": {
      const { values } = parseArgs({ args: [...rest], options: COMMON_OPTIONS })
      if (values.help) return Console.log(MIGRATE_HELP)
      return migrateCommand.pipe(Effect.provide(settingsFrom(values)))
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
      for (const [flag, value] of Object.entries(numbers)) {
        if (!/^\d+(\.\d+)?$/.test(value)) return fail(`--${flag}: expected a number, got ${value}`)
      }
      return Layer.launch(simulateServer({
        host: values.host ?? "127.0.0.1",
        port: Number(numbers.port),
        ttftMs: Number(numbers["ttft-ms"]),
        tokensPerSecond: Number(numbers["tokens-per-second"]),
        apiKey: values["api-key"]
      }))
    }
    default:
      return fail(`unknown command "${command}"\n\n${MAIN_HELP}`)
  }
}

const program = Effect.suspend(() => run(process.argv.slice(2))).pipe(
  Effect.catch((error: unknown) => {
    if (error instanceof ExitWithError) return Effect.fail(error)
    const message = error instanceof Error ? error.message : String(error)
    return fail(`gateway: ${message}`)
  }),
  Effect.catchDefect((defect) => fail(`gateway: ${defect instanceof Error ? defect.message : String(defect)}`))
)

NodeRuntime.runMain(program, {
  disableErrorReporting: true,
  // SIGTERM/SIGINT interrupt the program; a graceful stop after them is a success (exit 0).
  teardown: (exit, onExit) => onExit(Exit.isSuccess(exit) || Cause.hasInterruptsOnly(exit.cause) ? 0 : 1)
})
