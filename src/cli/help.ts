/**
 * The command line's help texts, apart from the commands themselves and importing nothing that
 * loads Effect: `gateway --help` and `gateway <command> --help` are answered by `main.ts` before any
 * command's module loads (~80 ms instead of ~270 ms here: Effect's modules alone took ~200).
 */
import { Surfaces } from "../keys/surfaces.ts"

export const MAIN_HELP = `gateway — model gateway and actor runtime

Usage: gateway <command> [options]

Commands:
  serve      run the HTTP gateway (default)
  keys       create, list and revoke API keys in the database (server stopped)
  migrate    apply database migrations and exit
  simulate   run the simulator as a standalone OpenAI/Anthropic-compatible upstream

Run "gateway <command> --help" for a command's options.
Environment: HOST, PORT, GATEWAY_DATA_DIR, DATABASE_URL, REDIS_URL, GATEWAY_CONFIG,
GATEWAY_ADMIN_TOKEN, GATEWAY_MAX_BODY_BYTES, GATEWAY_SHUTDOWN_GRACE_MS (see README).`

export const SERVE_HELP = `Usage: gateway serve [options]

Runs the gateway. With no DATABASE_URL it keeps everything in an embedded database under the
data dir; on the first start it prints one API key and creates an admin token.

Options:
  --host <addr>       listen address (env HOST, default 127.0.0.1)
  --port <n>          listen port (env PORT, default 8080; 0 picks a free port)
  --config <file>     JSON config file (env GATEWAY_CONFIG, default: built-in simulator catalog)
  --data-dir <dir>    data directory (env GATEWAY_DATA_DIR, default ./.data)
  -h, --help          show this help`

export const SIMULATE_HELP = `Usage: gateway simulate [options]

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

export const KEYS_HELP = `Usage: gateway keys <create|list|revoke> [options]

  keys create [--name <name>] [--plan <plan>] [--surfaces a,b] [--models pattern,...]
      creates a key and prints its secret once
  keys list [--json]
      lists keys (never their secrets)
  keys revoke <id>
      revokes a key; it is refused at once

Options:
  --config <file>    config file whose plans are valid (env GATEWAY_CONFIG)
  --data-dir <dir>   data directory of the embedded database (env GATEWAY_DATA_DIR)
  -h, --help         show this help
Surfaces: ${Surfaces.join(", ")}`

export const MIGRATE_HELP = `Usage: gateway migrate [--data-dir <dir>]

Applies database migrations to DATABASE_URL, or to the embedded database in the data dir, and exits.`

/** Each command's own help. */
export const COMMAND_HELP: Readonly<Record<string, string>> = { serve: SERVE_HELP, keys: KEYS_HELP, migrate: MIGRATE_HELP, simulate: SIMULATE_HELP }

const isHelpFlag = (arg: string | undefined) => arg === "-h" || arg === "--help"

/** `gateway --help`, `gateway -h`, `gateway help`: the main help's command. */
export const isHelpCommand = (command: string): boolean => isHelpFlag(command) || command === "help"

/**
 * The help a command line asks for and nothing else: `gateway --help` (or `-h`, `help`) and
 * `gateway <command> --help`. Undefined for anything else, help among other flags included: the
 * command's own parsing answers those (and refuses an unknown flag first).
 */
export const helpOnly = (command: string, rest: ReadonlyArray<string>): string | undefined => {
  if (isHelpCommand(command)) return rest.length === 0 ? MAIN_HELP : undefined
  // (Own keys only: `gateway constructor --help` is an unknown command, not Object's.)
  return rest.length === 1 && isHelpFlag(rest[0]) && Object.hasOwn(COMMAND_HELP, command) ? COMMAND_HELP[command] : undefined
}

/** Whether `gateway` has this command (help's spellings included). */
export const isCommand = (command: string): boolean => Object.hasOwn(COMMAND_HELP, command) || isHelpCommand(command)

/**
 * What `gateway` prints for a command it does not have. `main.ts` says it before any command's
 * module (and Effect's) loads: a mistyped command is answered at once.
 */
export const unknownCommandMessage = (command: string): string => `unknown command "${command}"\n\n${MAIN_HELP}`
