/**
 * The Lua scripts issued in one turn of the event loop, sent as one command. A request's turns each
 * issue a few (its admission: the metering script and the slot's enqueue; its end: the settle and
 * the slot's release), and on the client every command costs about as much again as its script
 * does on the server: an ioredis command object, its promise, its reply's parse. Measured on a slow
 * VM (`.scratch`, 2026-12-01): two scripts in one turn 58–63 µs of client CPU, one script doing
 * both 32–41.
 *
 * So the scripts of a turn go out as one EVALSHA of the bundle: every script defined so far as a
 * function, and a dispatcher that runs the turn's scripts in order, each with its own KEYS and
 * ARGV, each in `pcall` (one that fails fails alone, with its error; its writes before the error
 * stay, as they would have alone). The turn's scripts then run back to back, with nothing between
 * them: never less atomic than before. A turn with one script sends that script as it is.
 *
 * Order with other commands: the caller flushes the batch before it sends any other command
 * (`flush`), so commands leave in the order they were issued.
 *
 * A script goes out as a plain command (ioredis's `Command`): `EVAL` with its source the first
 * time on a connection (so a new or restarted server has it before anything after it runs, and
 * commands keep their order), `EVALSHA` after that, and `EVAL` again when Redis answers NOSCRIPT
 * (a `SCRIPT FLUSH`) — as ioredis's own script commands do. Not through ioredis's
 * `defineCommand`: its script commands (a subclass that replaces its own `reject` with a new
 * closure each time it is written) outlived young-generation collections, and with them what they
 * held — arguments, encoded text, reply — and what waited on them. A loop of ioredis commands
 * alone showed it for script commands only, not for `PING` or a plain `EVALSHA`. In Redis mode at
 * 200 req/s (`--trace-gc-nvp`, 2026-12-02): 624–639 KB promoted per scavenge and 4.0–4.4 ms pauses
 * through `defineCommand`, 332–338 KB and 2.8 ms with plain commands; what survives a scavenge
 * per request (`bench/alloc-profile.ts --redis --survivors`) 11.3 → 8.0 KiB.
 */
import { createHash } from "node:crypto"
import type { Command, Redis } from "ioredis"

/**
 * ioredis's `Command` class, given by the caller from the module it made the client with: a type
 * import here, so that importing this module does not load ioredis (~50 modules, ~0.15 s of CPU at
 * every start on a slow VM) in a gateway that never connects to Redis.
 */
export type CommandClass = typeof Command

interface Script {
  readonly lua: string
  readonly sha: string
}

interface Queued {
  readonly name: string
  readonly numKeys: number
  readonly keysAndArgs: ReadonlyArray<string | number>
  readonly resolve: (reply: unknown) => void
  readonly reject: (error: unknown) => void
}

/** Runs the turn's scripts: ARGV = n, then name, key count, argument count per script, then their arguments. */
const DISPATCH = `
local n = tonumber(ARGV[1])
local keyAt, argAt = 1, 2 + 3 * n
local out = {}
for i = 1, n do
  local name, nk, na = ARGV[3 * i - 1], tonumber(ARGV[3 * i]), tonumber(ARGV[3 * i + 1])
  local keys, args = {}, {}
  for j = 1, nk do keys[j] = KEYS[keyAt + j - 1] end
  for j = 1, na do args[j] = ARGV[argAt + j - 1] end
  keyAt, argAt = keyAt + nk, argAt + na
  local ok, reply = pcall(run, name, keys, args)
  if ok then out[i] = { 1, reply } else out[i] = { 0, type(reply) == 'table' and reply.err or tostring(reply) } end
end
return out
`

/**
 * The bundle's source: one function that runs the script it is named, each script a branch of its
 * own with its own KEYS and ARGV, then the dispatcher. Branches, not a table of one function per
 * script: that made every call allocate a closure per script defined, and the Lua heap's
 * collector's extra work showed in Redis's time per request (+40–70 µs on a slow VM).
 */
export const bundleSource = (sources: ReadonlyMap<string, { readonly lua: string }>): string => {
  const branches = [...sources].map(([name, { lua }]) => `if name == ${JSON.stringify(name)} then\ndo\n${lua}\nend\nreturn nil\nend`)
  return `local function run(name, KEYS, ARGV)\n${branches.join("\n")}\nerror('no script named ' .. name)\nend\n${DISPATCH}`
}

/** Replies as strings, as ioredis's script commands give them (a plain command's are Buffers). */
const UTF8 = { replyEncoding: "utf8" } as const

const scriptOf = (lua: string): Script => ({ lua, sha: createHash("sha1").update(lua).digest("hex") })

export const makeScriptBatcher = (client: Redis, Command: CommandClass) => {
  /** `EVAL source …` or `EVALSHA sha …` as a plain command. */
  const send = (command: "eval" | "evalsha", script: string, numKeys: number, keysAndArgs: ReadonlyArray<string | number>) =>
    client.sendCommand(new Command(command, [script, numKeys, ...keysAndArgs], UTF8)) as Promise<unknown>

  const scripts = new Map<string, Script>()
  let bundle: { readonly script: Script; readonly scripts: number } | undefined
  let batch: Array<Queued> = []
  // The scripts sent with their source on the current connection (a reconnect starts afresh).
  let loadedOn: unknown
  const loaded = new Set<string>()

  /** The bundle of the scripts defined so far (made again when more were). */
  const bundleScript = () => {
    if (bundle === undefined || bundle.scripts !== scripts.size) bundle = { script: scriptOf(bundleSource(scripts)), scripts: scripts.size }
    return bundle.script
  }

  /** Runs `script`: `EVAL` the first time on this connection, `EVALSHA` after, `EVAL` again on NOSCRIPT. */
  const evalScript = (script: Script, numKeys: number, keysAndArgs: ReadonlyArray<string | number>): Promise<unknown> => {
    if (loadedOn !== client.stream) {
      loadedOn = client.stream
      loaded.clear()
    }
    if (!loaded.has(script.sha)) {
      loaded.add(script.sha)
      return send("eval", script.lua, numKeys, keysAndArgs)
    }
    return send("evalsha", script.sha, numKeys, keysAndArgs).catch((error: unknown) =>
      error instanceof Error && error.message.startsWith("NOSCRIPT") ? send("eval", script.lua, numKeys, keysAndArgs) : Promise.reject(error)
    )
  }

  return {
    /**
     * Defines scripts by name: for `queue` (each also a function of the bundle), and as commands of
     * the connection for the callers that send them in a pipeline or alone, off the request path
     * (renewals, seeding).
     */
    define: (defined: Readonly<Record<string, string>>) => {
      for (const [name, lua] of Object.entries(defined)) {
        const known = scripts.get(name)?.lua
        if (known === lua) continue
        if (known !== undefined) throw new Error(`a different script named ${name} is defined already`)
        scripts.set(name, scriptOf(lua))
        client.defineCommand(name, { lua })
      }
    },

    /** Queues a script for the turn's command; its reply (or error) when the command is answered. */
    queue: (name: string, numKeys: number, keysAndArgs: ReadonlyArray<string | number>): Promise<unknown> => {
      if (!scripts.has(name)) return Promise.reject(new Error(`no script named ${name}`))
      return new Promise((resolve, reject) => batch.push({ name, numKeys, keysAndArgs, resolve, reject }))
    },

    /** Sends what is queued: one script as it is, several as one EVALSHA of the bundle. */
    flush: () => {
      if (batch.length === 0) return
      const queued = batch
      batch = []
      if (queued.length === 1) {
        const only = queued[0]
        evalScript(scripts.get(only.name)!, only.numKeys, only.keysAndArgs).then(only.resolve, only.reject)
        return
      }
      const keys: Array<string | number> = []
      const header: Array<string | number> = [queued.length]
      const args: Array<string | number> = []
      for (const script of queued) {
        header.push(script.name, script.numKeys, script.keysAndArgs.length - script.numKeys)
        for (let i = 0; i < script.keysAndArgs.length; i++) (i < script.numKeys ? keys : args).push(script.keysAndArgs[i])
      }
      evalScript(bundleScript(), keys.length, [...keys, ...header, ...args]).then(
        (replies) => {
          queued.forEach((script, i) => {
            const [ok, reply] = (replies as ReadonlyArray<readonly [number, unknown]>)[i] ?? [0, "no reply in the bundle's answer"]
            if (ok === 1) script.resolve(reply ?? null)
            else script.reject(new Error(String(reply)))
          })
        },
        (error: unknown) => {
          for (const script of queued) script.reject(error)
        }
      )
    }
  }
}
