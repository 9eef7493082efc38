#!/usr/bin/env node
/**
 * The `gateway` command: `serve` (default), `keys`, `migrate`, `simulate` (`cli/program.ts`).
 * Run through npm (`npm start`, `npm run gateway -- keys list`) so Node 24 from node_modules is used.
 *
 * This entry loads nothing before two things that must come first:
 * - the commands' modules (~850 for `serve`, Effect's included) are compiled through Node's
 *   on-disk compile cache (`NODE_COMPILE_CACHE`, else <tmpdir>/node-compile-cache; entries are
 *   checked against the file's contents): after the first start, a start neither type-strips our
 *   .ts files again nor reparses what V8 cached, so it is faster and leaves less start-up garbage
 *   in the heap (lower idle RSS). The variable is set so the database's worker thread inherits it;
 * - `serve` then replaces its process with one whose C library gives memory back (fewer malloc
 *   arenas, fixed thresholds), and on one core with V8's collector on the main thread alone
 *   (`util/process-settings.ts`), before a module or thread has started.
 *   The new process starts with `NODE_COMPILE_CACHE` already set, so even this file comes from the
 *   cache and Node never loads its TypeScript stripper (amaro: a 3.8 MB script and a WASM
 *   instance), which this file alone needed before: ~10 MiB less RSS, idle or quiet;
 * - a stdout or stderr whose reader has gone is never a crash (below);
 * - help alone (`gateway --help`, `gateway keys --help`) is printed without loading a command
 *   (`cli/help.ts`), and so is the mistake of a command that does not exist;
 * - `serve`, `keys` and `migrate` on the embedded database start the database's thread
 *   (`storage/embedded-thread.ts`); once the command line and settings are read, the thread opens
 *   the database while the command's modules load, and what no layer took over is closed cleanly
 *   when the command is over (`cli/program.ts`, `storage/embedded-database.ts` `openEarly`).
 */
import { enableCompileCache } from "node:module"
import { commandLine } from "./cli/command-line.ts"
import { helpOnly, isCommand, unknownCommandMessage } from "./cli/help.ts"
import { applyProcessSettings } from "./util/process-settings.ts"

const compileCache = enableCompileCache()
if (compileCache.directory !== undefined) process.env.NODE_COMPILE_CACHE ??= compileCache.directory

/** The commands that open the database. */
const OPENS_DATABASE = new Set(["serve", "keys", "migrate"])

const { command, rest } = commandLine(process.argv.slice(2))
// Help alone is answered at once: before any command's module (and Effect's) loads, and before
// `serve`'s process settings (which start the process again).
const help = helpOnly(command, rest)

if (help === undefined && command === "serve") applyProcessSettings()
// On the embedded database, the commands that open it start its thread now: its own start-up
// (Node's, PGlite's modules, compiling its WASM) runs beside the loading of the command's modules
// below, on the other core, instead of after it: `storage/embedded-thread.ts`.
if (help === undefined && OPENS_DATABASE.has(command) && (process.env.DATABASE_URL ?? "").trim() === "") {
  const { startEarlyThread } = await import("./storage/embedded-thread.ts")
  startEarlyThread()
}

// A reader of stdout or stderr that goes away (`npm start | head -1`, a log shipper that exits or
// restarts) turned the next write into an unhandled EPIPE 'error' event, and the gateway crashed.
// Now what would be written there is dropped, once said on the other stream; serving goes on.
for (const [stream, other, name] of [[process.stdout, process.stderr, "stdout"], [process.stderr, process.stdout, "stderr"]] as const) {
  stream.once("error", (error: NodeJS.ErrnoException) => {
    stream.on("error", () => {})
    if (!other.destroyed) other.write(`${name} can no longer be written (${error.code ?? error.message}): what the gateway writes there is dropped\n`)
  })
}

if (help !== undefined) process.stdout.write(`${help}\n`)
else if (!isCommand(command)) {
  process.stderr.write(`${unknownCommandMessage(command)}\n`)
  process.exitCode = 1
} else await import("./cli/program.ts")
