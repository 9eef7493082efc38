/** The `gateway` command: help on every subcommand, key management against a stopped server's data dir. */
import { existsSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { createServer } from "node:net"
import { dirname, join } from "node:path"
import { describe, expect, it } from "vitest"
import { COMMAND_HELP, MAIN_HELP } from "../../src/cli/help.ts"
import { embeddedDataDir, freshDataDir } from "../support/engines.ts"
import { runCli } from "../support/gateway-process.ts"
import { startInProcessGateway } from "../support/in-process-gateway.ts"

describe("gateway CLI", () => {
  it("prints help for each command, and says a command does not exist, without loading a command's modules", async () => {
    // Each process lists the Effect modules it loaded (a module hook preloaded through NODE_OPTIONS).
    const dir = freshDataDir()
    const loadedBy = (i: number) => join(dir, `loaded-${i}.txt`)
    const hook = `data:text/javascript,${encodeURIComponent(`
      import { registerHooks } from "node:module"
      import { appendFileSync } from "node:fs"
      registerHooks({ load(url, context, next) {
        if (url.includes("/node_modules/effect/")) appendFileSync(process.env.LOADED_LOG, url + "\\n")
        return next(url, context)
      } })`)}`
    const run = (args: ReadonlyArray<string>, i: number) => runCli(args, { NODE_OPTIONS: `--import=${hook}`, LOADED_LOG: loadedBy(i) })
    const loaded = (i: number) => (existsSync(loadedBy(i)) ? readFileSync(loadedBy(i), "utf8").split("\n").filter(Boolean).length : 0)
    try {
      const helps: ReadonlyArray<readonly [ReadonlyArray<string>, string]> = [
        [["--help"], MAIN_HELP], [["-h"], MAIN_HELP], [["help"], MAIN_HELP],
        ...Object.entries(COMMAND_HELP).map(([command, text]) => [[command, "--help"], text] as const),
        [["keys", "-h"], COMMAND_HELP.keys]
      ]
      // Help among other flags is the command's own parsing: it loads the command line's program.
      const withFlags = [["keys", "--name", "x", "--help"], COMMAND_HELP.keys] as const
      // Independent processes: run at once rather than one after another.
      const [unknown, unknownHelp, flagged, ...results] = await Promise.all([
        run(["frobnicate"], 0), run(["constructor", "--help"], 1), run(withFlags[0], 2),
        ...helps.map(([args], i) => run(args, 3 + i))
      ])
      helps.forEach(([args, text], i) => {
        expect(results[i].code, args.join(" ")).toBe(0)
        expect(results[i].stdout, args.join(" ")).toBe(`${text}\n`)
        expect(loaded(3 + i), args.join(" ")).toBe(0)
      })
      expect(flagged.stdout).toBe(`${withFlags[1]}\n`)
      expect(loaded(2)).toBeGreaterThan(100)
      expect(unknown.code).toBe(1)
      expect(unknown.stderr).toBe(`unknown command "frobnicate"\n\n${MAIN_HELP}\n`)
      expect(unknownHelp.code).toBe(1)
      expect(unknownHelp.stderr).toContain('unknown command "constructor"')
      // A command that does not exist is answered before Effect loads (it loaded 247 of its modules).
      expect([loaded(0), loaded(1)]).toEqual([0, 0])
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })

  it("refuses a port that is not one, on serve and simulate alike", async () => {
    const dir = freshDataDir()
    try {
      const [serve, simulate] = await Promise.all([
        runCli(["serve", "--port", "1.5"], { GATEWAY_DATA_DIR: dir }),
        // It printed Node's "options.port should be >= 0 and < 65536. Received type number (70000)."
        runCli(["simulate", "--port", "70000"], {})
      ])
      expect([serve.code, simulate.code]).toEqual([1, 1])
      expect(serve.stderr).toContain("--port: expected a whole number from 0 to 65535, got 1.5")
      expect(simulate.stderr).toContain("--port: expected a whole number from 0 to 65535, got 70000")
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })

  it("creates, lists and revokes keys in the database; the server then honours them", async () => {
    const dir = freshDataDir()
    try {
      const env = { GATEWAY_DATA_DIR: dir }
      expect((await runCli(["migrate"], env)).code).toBe(0)
      const created = await runCli(["keys", "create", "--name", "cli", "--plan", "pro", "--surfaces", "states"], env)
      expect(created.code, created.stderr).toBe(0)
      const secret = /key \(shown once\): (svc_\S+)/.exec(created.stdout)![1]
      const id = /created (key_\S+)/.exec(created.stdout)![1]
      const listed = await runCli(["keys", "list", "--json"], env)
      const keys = JSON.parse(listed.stdout)
      expect(keys).toHaveLength(1)
      expect(keys[0]).toMatchObject({ id, name: "cli", plan: "pro", permissions: { surfaces: ["states"], models: null } })
      expect(listed.stdout).not.toContain(secret)

      // A key made before the first start counts as the first key: no second key is printed. The
      // server runs in this process (the subject is what the CLI wrote and how the CLI behaves beside
      // a running server, not the server's process: two process starts fewer, ~5 s of CPU).
      const gw = await startInProcessGateway(env)
      try {
        expect(gw.apiKey).toBeUndefined()
        const ok = await fetch(`${gw.baseUrl}/v1/states`, { method: "POST", headers: { authorization: `Bearer ${secret}` }, body: "{}" })
        expect(ok.status).toBe(201)
        // While the server runs, the CLI refuses to open the embedded database.
        const locked = await runCli(["keys", "list"], env)
        expect(locked.code).toBe(1)
        expect(locked.stderr).toMatch(/in use by gateway process/)
        // Arguments are checked before the database is opened: a mistake is named as itself, at
        // once, even while the server holds the database.
        const [badPlan, badSurface, noId, longName, badModel] = await Promise.all([
          runCli(["keys", "create", "--plan", "platinum"], env),
          runCli(["keys", "create", "--surfaces", "chat,telepathy"], env),
          runCli(["keys", "revoke"], env),
          // By the admin API's rules (`keys/key-fields.ts`), which the command line did not apply.
          runCli(["keys", "create", "--name", "n".repeat(201)], env),
          runCli(["keys", "create", "--models", "svc-atlas-1,svc atlas"], env)
        ])
        expect(badPlan.code).toBe(1)
        expect(badPlan.stderr).toMatch(/--plan: unknown plan "platinum"; known plans: .*pro/)
        expect(badSurface.code).toBe(1)
        expect(badSurface.stderr).toContain('--surfaces: unknown surface "telepathy"')
        expect(noId.code).toBe(1)
        expect(noId.stderr).toContain("keys revoke: give the key id")
        expect(longName.code).toBe(1)
        expect(longName.stderr).toContain("--name: Expected a value with a length of at most 200")
        expect(badModel.code).toBe(1)
        expect(badModel.stderr).toContain("--models: Expected a model id pattern of letters, digits, . - _ : and *")
      } finally {
        expect(await gw.stop()).toBe(0)
      }
      const revoked = await runCli(["keys", "revoke", id], env)
      expect(revoked.code, revoked.stderr).toBe(0)
      const gw2 = await startInProcessGateway(env)
      try {
        const refused = await fetch(`${gw2.baseUrl}/v1/states`, { method: "POST", headers: { authorization: `Bearer ${secret}` }, body: "{}" })
        expect(refused.status).toBe(401)
      } finally {
        await gw2.stop()
      }
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
    // 8 processes one after another, 4 of them opening the database (~10 with the server in a
    // process of its own: 88 s of a 90 s limit in a full run on a 2-core VM three times slower
    // than most, 2026-11-27, though ~15 s alone).
  }, 180_000)

  it("a command that fails closes the database it opened and lets go of the data dir, before its layers take it over or after; the failure says why", async () => {
    // What a crash leaves: Postgres' postmaster.pid (removed by a clean shutdown) and the gateway's
    // lock file. `serve`, `keys` and `migrate` open an existing database while their modules load;
    // these fail after that (on the config file, on a setting, on a plan), before any layer takes it over.
    const left = (dir: string) => ["gateway.lock", "pglite/postmaster.pid"].filter((file) => existsSync(join(dir, file)))
    const badConfig = join(freshDataDir(), "bad-config.json")
    writeFileSync(badConfig, JSON.stringify({ models: 5 }))
    const dirs = [embeddedDataDir(), embeddedDataDir(), embeddedDataDir(), embeddedDataDir()]
    // And one that fails later, once its layers hold the database: its port is taken.
    const taken = createServer()
    await new Promise<void>((resolve) => taken.listen(0, "127.0.0.1", resolve))
    const takenPort = String((taken.address() as { port: number }).port)
    // And a PostgreSQL where nothing listens (a port that was free a moment ago).
    const closed = createServer()
    await new Promise<void>((resolve) => closed.listen(0, "127.0.0.1", resolve))
    const closedPort = String((closed.address() as { port: number }).port)
    await new Promise((resolve) => closed.close(resolve))
    try {
      const [serve, keys, setting, listen, fileInTheWay, noDatabase] = await Promise.all([
        runCli(["serve", "--port", "0", "--config", badConfig], { GATEWAY_DATA_DIR: dirs[0] }),
        runCli(["keys", "create", "--plan", "no-such-plan"], { GATEWAY_DATA_DIR: dirs[1] }),
        // A keepalive of 0 ms would write keepalives in a busy loop: refused, by name.
        runCli(["serve", "--port", "0"], { GATEWAY_DATA_DIR: dirs[2], GATEWAY_KEEPALIVE_MS: "0" }),
        runCli(["serve", "--port", takenPort], { GATEWAY_DATA_DIR: dirs[3] }),
        // A data dir that is a file: said so (it printed Node's "EEXIST: file already exists, mkdir …").
        runCli(["migrate"], { GATEWAY_DATA_DIR: badConfig }),
        runCli(["migrate"], { DATABASE_URL: `postgres://nobody@127.0.0.1:${closedPort}/test` })
      ])
      expect(serve.code).toBe(1)
      expect(serve.stderr).toContain("invalid config")
      expect(keys.code).toBe(1)
      expect(keys.stderr).toContain('unknown plan "no-such-plan"')
      expect(setting.code).toBe(1)
      expect(setting.stderr).toContain("gateway: invalid setting GATEWAY_KEEPALIVE_MS: Expected a value between 1 and 2147483647")
      // It printed "gateway: " and nothing more (the platform's error keeps its reason as its cause).
      expect(listen.code).toBe(1)
      expect(listen.stderr).toContain(`gateway: cannot listen: listen EADDRINUSE: address already in use 127.0.0.1:${takenPort}`)
      expect(fileInTheWay.code).toBe(1)
      expect(fileInTheWay.stderr).toContain(`gateway: cannot use ${badConfig} as the data directory (GATEWAY_DATA_DIR, or \`dataDir\` when embedded): a file is in the way`)
      // It said "PgConnection: Failed to connect" and not why.
      expect(noDatabase.code).toBe(1)
      expect(noDatabase.stderr).toContain(`gateway: PgConnection: Failed to connect: connect ECONNREFUSED 127.0.0.1:${closedPort}`)
      expect(dirs.map(left)).toEqual([[], [], [], []])
      // The database still serves: a key made now is listed.
      expect((await runCli(["keys", "create", "--name", "after"], { GATEWAY_DATA_DIR: dirs[1] })).code).toBe(0)
      const listed = await runCli(["keys", "list", "--json"], { GATEWAY_DATA_DIR: dirs[1] })
      expect(JSON.parse(listed.stdout)).toMatchObject([{ name: "after" }])
      expect(left(dirs[1])).toEqual([])
    } finally {
      taken.close()
      for (const dir of [...dirs, dirname(badConfig)]) rmSync(dir, { recursive: true, force: true })
    }
  }, 120_000)
})
