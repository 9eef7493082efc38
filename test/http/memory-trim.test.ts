/**
 * The gateway gives memory back (src/util/heap-trim.ts) once it has been quiet for a while after
 * start-up or after requests — never while a request is in flight, and not again and again while
 * it stays idle. The subject is the process's own heap, so the gateway is a child process; its log
 * lines say when it trimmed.
 */
import { existsSync, readFileSync, rmSync } from "node:fs"
import { connect } from "node:net"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { embeddedDataDir } from "../support/engines.ts"
import { fastConfigEnv } from "../support/fast-config.ts"
import { type GatewayProcess, startGateway } from "../support/gateway-process.ts"
import { startInProcessGateway } from "../support/in-process-gateway.ts"

const QUIET_MS = 250
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/** The trim lines logged so far, as `{ heap: [before, after] }`. */
const trims = (output: string) =>
  [...output.matchAll(/memory trimmed after (\d+) ms quiet: heap (\d+) → (\d+) MiB, RSS (\d+) → (\d+) MiB in ([\d.]+) ms/g)]
    .map((m) => ({ quietMs: Number(m[1]), heap: [Number(m[2]), Number(m[3])] }))

/** Trims that also stopped the idle tokenizer thread. */
const stoppedTokenizers = (output: string) => [...output.matchAll(/memory trimmed after [^\n]*; tokenizer thread stopped/g)].length

/**
 * A module hook, preloaded through NODE_OPTIONS, that appends the package of every module the
 * process loads from node_modules to the file `LOADED_PACKAGES` names.
 */
const packagesHook = `data:text/javascript,${encodeURIComponent(`
  import { registerHooks } from "node:module"
  import { appendFileSync } from "node:fs"
  registerHooks({ load(url, context, next) {
    const m = /\\/node_modules\\/((@[^/]+\\/)?[^/]+)\\//.exec(url)
    if (m !== null) appendFileSync(process.env.LOADED_PACKAGES, m[1] + "\\n")
    return next(url, context)
  } })`)}`

describe("memory trim", () => {
  let dir: string
  let gw: GatewayProcess
  let loadedPackages: string
  beforeAll(async () => {
    dir = embeddedDataDir()
    loadedPackages = join(dir, "loaded-packages.txt")
    gw = await startGateway({
      GATEWAY_DATA_DIR: dir,
      ...fastConfigEnv(dir),
      GATEWAY_IDLE_TRIM_MS: String(QUIET_MS),
      NODE_OPTIONS: `${process.env.NODE_OPTIONS ?? ""} --import=${packagesHook}`,
      LOADED_PACKAGES: loadedPackages
    })
  }, 60_000)
  afterAll(async () => {
    await gw?.stop()
    rmSync(dir, { recursive: true, force: true })
  })

  it.runIf(process.platform === "linux")("serves under the allocator settings (src/util/process-settings.ts)", () => {
    const environment = readFileSync(`/proc/${gw.child.pid}/environ`, "utf8").split("\0")
    if (process.env.MALLOC_ARENA_MAX === undefined && process.env.GLIBC_TUNABLES === undefined) {
      expect(environment).toContain("MALLOC_ARENA_MAX=2")
      // glibc cuts the variable's original text after the first tunable once it has read them all
      // (the process itself sees it whole: test/util/process-settings.test.ts).
      expect(environment.filter((entry) => entry.startsWith("GLIBC_TUNABLES=glibc.malloc.trim_threshold=131072"))).toHaveLength(1)
    } else {
      // The operator's (here the test run's) own settings are kept as they are.
      expect(environment.filter((entry) => entry.startsWith("GLIBC_TUNABLES=glibc.malloc.trim_threshold=131072"))).toHaveLength(0)
    }
  })

  it("loads no Redis client without REDIS_URL (src/coordination/redis-client.ts loads it when it connects)", () => {
    const packages = new Set(existsSync(loadedPackages) ? readFileSync(loadedPackages, "utf8").split("\n") : [])
    expect(packages.has("effect"), "the module hook saw the gateway's packages").toBe(true)
    expect(packages.has("ioredis")).toBe(false)
  })

  it("trims once quiet after start-up, and the heap is smaller after it", async () => {
    await expect.poll(() => trims(gw.output()).length, { timeout: 10_000 }).toBeGreaterThan(0)
    const [first] = trims(gw.output())
    expect(first.quietMs).toBe(QUIET_MS)
    expect(first.heap[1]).toBeLessThan(first.heap[0])
    // The simulator catalog started the tokenizer thread with the server; quiet, it stops.
    expect(stoppedTokenizers(gw.output())).toBe(1)
    await sleep(QUIET_MS * 6)
    expect(trims(gw.output())).toHaveLength(1)
  })

  it("trims after a quiet period that follows requests, never while a request is in flight, and once per quiet period", async () => {
    const before = trims(gw.output()).length
    expect((await fetch(`${gw.baseUrl}/v1/models`, { headers: { authorization: `Bearer ${gw.apiKey}` } })).status).toBe(200)
    // A request whose body is still arriving is in flight: its headers are in, its body is not.
    const { hostname, port } = new URL(gw.baseUrl)
    const held = connect(Number(port), hostname)
    await new Promise<void>((resolve) => held.once("connect", () => resolve()))
    held.write(`POST /v1/chat/completions HTTP/1.1\r\nhost: ${hostname}\r\nauthorization: Bearer ${gw.apiKey}\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{"model":`)
    await sleep(QUIET_MS * 8)
    expect(trims(gw.output()).length).toBe(before)

    held.destroy()
    await expect.poll(() => trims(gw.output()).length, { timeout: 10_000 }).toBe(before + 1)
    // Idle since: no second trim for the same quiet period.
    await sleep(QUIET_MS * 8)
    expect(trims(gw.output()).length).toBe(before + 1)

    // New requests, then quiet again: one more. A simulated answer counts its tokens: the
    // tokenizer thread starts again, and stops again with the trim.
    const stopped = stoppedTokenizers(gw.output())
    const answer = await fetch(`${gw.baseUrl}/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${gw.apiKey}`, "content-type": "application/json" },
      body: JSON.stringify({ model: "svc-pico-1", messages: [{ role: "user", content: "say exactly: ok" }] })
    })
    expect(answer.status).toBe(200)
    expect(((await answer.json()) as { usage: { prompt_tokens: number } }).usage.prompt_tokens).toBeGreaterThan(0)
    await expect.poll(() => trims(gw.output()).length, { timeout: 10_000 }).toBe(before + 2)
    expect(stoppedTokenizers(gw.output())).toBe(stopped + 1)
  }, 30_000)
})

describe("memory trim off", () => {
  it("GATEWAY_IDLE_TRIM_MS=0 never trims", async () => {
    const dir = embeddedDataDir()
    const gw = await startInProcessGateway({ GATEWAY_DATA_DIR: dir, ...fastConfigEnv(dir), GATEWAY_IDLE_TRIM_MS: "0" })
    try {
      expect((await fetch(`${gw.baseUrl}/v1/models`, { headers: { authorization: `Bearer ${gw.apiKey}` } })).status).toBe(200)
      await sleep(500)
      expect(trims(gw.output())).toEqual([])
    } finally {
      await gw.stop()
      rmSync(dir, { recursive: true, force: true })
    }
  }, 60_000)
})
