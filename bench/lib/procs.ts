/**
 * The processes of the rig: the gateway (`node src/main.ts serve`), the standalone simulator
 * upstream (`gateway simulate`) and Portkey's gateway, each a child process pinned to one core with
 * `taskset`, plus readers of their resident memory and CPU time from /proc.
 */
import { type ChildProcess, execFileSync, spawn } from "node:child_process"
import { randomBytes } from "node:crypto"
import { createWriteStream, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { createServer } from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"

export const ROOT = join(import.meta.dirname, "..", "..")
const MAIN = join(ROOT, "src", "main.ts")
const PORTKEY = join(ROOT, "bench", "portkey-server.ts")
/** Node 24 from the `node` devDependency (the system node may be older); run.ts runs on it too. */
export const NODE = process.execPath

export interface Proc {
  readonly name: string
  readonly pid: number
  readonly url: string
  readonly child: ChildProcess
  readonly output: () => string
  /**
   * Event-loop delay since the previous call (µs percentiles), when the process was started with
   * `--import bench/lib/loop-probe.ts`; undefined otherwise.
   */
  loopDelay(): Promise<LoopDelay | undefined>
  stop(): Promise<void>
}

/** µs, as loop-probe.ts reports them. */
export interface LoopDelay {
  readonly count: number
  readonly p50: number
  readonly p99: number
  readonly p999: number
  readonly max: number
  readonly mean: number
  /** With `BENCH_PROBE_CPU_MS`: the most main-thread CPU between two probe ticks (µs). */
  readonly cpuMax?: number
}

/** Node flags that load the event-loop probe (see loop-probe.ts). */
export const LOOP_PROBE = ["--import", join(ROOT, "bench", "lib", "loop-probe.ts")]

const live = new Set<Proc>()

/** Stops every child still running (on exit, error or Ctrl-C). */
export const stopAll = async () => {
  await Promise.all([...live].map((p) => p.stop()))
}

/** Pins a running process and all its threads to one core. */
export const pin = (pid: number, cpu: number) => {
  execFileSync("taskset", ["-a", "-p", "-c", String(cpu), String(pid)], { stdio: "ignore" })
}

/** The cores a process may run on, as taskset prints them (e.g. "0"). */
export const affinity = (pid: number): string =>
  execFileSync("taskset", ["-p", "-c", String(pid)], { encoding: "utf8" }).trim().split(":").pop()!.trim()

export const freePort = () =>
  new Promise<number>((resolve, reject) => {
    const server = createServer()
    server.once("error", reject)
    server.listen(0, "127.0.0.1", () => {
      const port = (server.address() as { port: number }).port
      server.close(() => resolve(port))
    })
  })

/** A clean environment: nothing of the caller's gateway, database or Redis settings leaks in. */
const baseEnv = (): Record<string, string> => {
  const env: Record<string, string> = {}
  for (const [k, v] of Object.entries(process.env)) {
    if (v === undefined) continue
    if (k.startsWith("GATEWAY_") || k === "DATABASE_URL" || k === "REDIS_URL" || k === "PORT" || k === "HOST") continue
    env[k] = v
  }
  return { ...env, CI: "", NODE_ENV: "production" }
}

interface SpawnOptions {
  readonly name: string
  readonly args: ReadonlyArray<string>
  readonly env?: Record<string, string>
  /** Matched against the output; its first group (if any) is the URL. */
  readonly ready: RegExp
  readonly url?: string
  /**
   * The core the process runs on, from its start (`taskset -c`), as a server confined to one core
   * by its container's cpuset would: the gateway reads its affinity at start (one core: V8's
   * collector on the main thread, `src/util/process-settings.ts`). Before, servers inherited the
   * bench's own core (1) and were moved to theirs once up.
   */
  readonly cpu: number
  readonly logDir: string
  readonly timeoutMs?: number
}

export const spawnPinned = async (options: SpawnOptions): Promise<Proc> => {
  const child = spawn("taskset", ["-c", String(options.cpu), NODE, ...options.args], {
    cwd: ROOT,
    env: { ...baseEnv(), ...options.env },
    stdio: ["ignore", "pipe", "pipe"]
  })
  const logFile = createWriteStream(join(options.logDir, `${options.name}.log`))
  let output = ""
  let probeWaiter: ((report: LoopDelay) => void) | undefined
  const collect = (d: Buffer) => {
    logFile.write(d)
    const text = d.toString()
    if (output.length < 64_000) output += text
    const probe = /loop-probe (\{.*\})/.exec(text)
    if (probe !== null && probeWaiter !== undefined) {
      probeWaiter(JSON.parse(probe[1]!) as LoopDelay)
      probeWaiter = undefined
    }
  }
  child.stdout!.on("data", collect)
  child.stderr!.on("data", collect)
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()))
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${options.name} did not start in time:\n${output}`)), options.timeoutMs ?? 90_000)
    const check = () => {
      const m = options.ready.exec(output)
      if (m !== null) {
        clearTimeout(timer)
        child.stdout!.off("data", check)
        child.stderr!.off("data", check)
        resolve(m[1] ?? options.url ?? "")
      }
    }
    child.stdout!.on("data", check)
    child.stderr!.on("data", check)
    child.once("exit", (code) => {
      clearTimeout(timer)
      reject(new Error(`${options.name} exited with ${code} before it was ready:\n${output}`))
    })
  })
  const proc: Proc = {
    name: options.name,
    pid: child.pid!,
    url,
    child,
    output: () => output,
    loopDelay: () => {
      if (!options.args.includes(LOOP_PROBE[1]!)) return Promise.resolve(undefined)
      return new Promise<LoopDelay | undefined>((resolve) => {
        const timer = setTimeout(() => resolve(undefined), 2_000)
        probeWaiter = (report) => {
          clearTimeout(timer)
          resolve(report)
        }
        child.kill("SIGUSR2")
      })
    },
    stop: async () => {
      live.delete(proc)
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGTERM")
      const timer = setTimeout(() => child.kill("SIGKILL"), 20_000)
      await exited
      clearTimeout(timer)
      logFile.end()
    }
  }
  live.add(proc)
  return proc
}

/** `gateway simulate`: the standalone upstream (OpenAI Chat Completions + Anthropic Messages). */
export const startSimulate = (logDir: string, name: string, ttftMs: number, tokensPerSecond: number, cpu: number) =>
  spawnPinned({
    name,
    args: [MAIN, "simulate", "--host", "127.0.0.1", "--port", "0", "--ttft-ms", String(ttftMs), "--tokens-per-second", String(tokensPerSecond)],
    ready: /simulator listening on (http:\/\/\S+)/,
    cpu,
    logDir
  })

/** The fixed-answer upstream (fixed-upstream.ts) as its own pinned process. */
export const startFixed = (logDir: string, name: string, pacing: { ttftMs: number; gapMs: number }, cpu: number) =>
  spawnPinned({
    name,
    args: [join(ROOT, "bench", "lib", "fixed-upstream.ts"), "0"],
    env: { FIXED_TTFT_MS: String(pacing.ttftMs), FIXED_GAP_MS: String(pacing.gapMs) },
    ready: /fixed upstream listening on (http:\/\/\S+)/,
    cpu,
    logDir
  })

export interface GatewayOptions {
  readonly name: string
  readonly config: unknown
  readonly adminToken: string
  readonly logDir: string
  readonly cpu: number
  readonly env?: Record<string, string>
  /** Node flags before the script (e.g. `--cpu-prof`). */
  readonly nodeArgs?: ReadonlyArray<string>
}

export interface Gateway extends Proc {
  readonly adminToken: string
  admin(method: string, path: string, body?: unknown): Promise<any>
  createKey(name: string, plan: string): Promise<string>
}

/**
 * Node flags for every gateway a bench starts, after its own (`BENCH_GATEWAY_NODE_ARGS`, split on
 * spaces): to compare a setting across a whole run, e.g. `--no-single-threaded-gc`.
 */
const EXTRA_GATEWAY_NODE_ARGS = (process.env.BENCH_GATEWAY_NODE_ARGS ?? "").split(" ").filter((arg) => arg !== "")

/** The gateway under test (`node src/main.ts serve --port 0`) on a fresh data dir. */
export const startGateway = async (options: GatewayOptions): Promise<Gateway> => {
  const dir = mkdtempSync(join(tmpdir(), `bench-${options.name}-`))
  const configFile = join(dir, "config.json")
  writeFileSync(configFile, JSON.stringify(options.config))
  const proc = await spawnPinned({
    name: options.name,
    args: [...(options.nodeArgs ?? []), ...EXTRA_GATEWAY_NODE_ARGS, MAIN, "serve", "--host", "127.0.0.1", "--port", "0"],
    env: {
      GATEWAY_CONFIG: configFile,
      GATEWAY_DATA_DIR: join(dir, "data"),
      GATEWAY_ADMIN_TOKEN: options.adminToken,
      ...options.env
    },
    ready: /gateway listening on (http:\/\/\S+)/,
    cpu: options.cpu,
    logDir: options.logDir,
    timeoutMs: 180_000
  })
  const admin = async (method: string, path: string, body?: unknown) => {
    const res = await fetch(`${proc.url}${path}`, {
      method,
      headers: { authorization: `Bearer ${options.adminToken}`, "content-type": "application/json" },
      ...(body === undefined ? {} : { body: JSON.stringify(body) })
    })
    const text = await res.text()
    if (res.status >= 300) throw new Error(`${options.name}: ${method} ${path} → ${res.status} ${text}`)
    return JSON.parse(text)
  }
  return {
    ...proc,
    adminToken: options.adminToken,
    admin,
    createKey: async (name, plan) => (await admin("POST", "/admin/v1/keys", { name, plan })).key as string,
    stop: async () => {
      await proc.stop()
      rmSync(dir, { recursive: true, force: true })
    }
  }
}

/**
 * Portkey's gateway (`@portkey-ai/gateway`), headless, through bench/portkey-server.ts. Stock
 * (`stockResponse` "1") for plain calls; "0" restores the platform `Response` so its streaming
 * path works (see portkey-server.ts).
 */
export const startPortkey = async (logDir: string, cpu: number, stockResponse: "0" | "1") => {
  const port = await freePort()
  return spawnPinned({
    name: stockResponse === "1" ? "portkey" : "portkey-streams",
    args: [PORTKEY, "--headless", `--port=${port}`],
    env: { PORTKEY_STOCK_RESPONSE: stockResponse },
    ready: /Ready for connections/,
    url: `http://127.0.0.1:${port}`,
    cpu,
    logDir
  })
}

/**
 * `bench/bare-proxy.ts`: the floor of a Node proxy (node:http in, undici out, nothing else); or, as
 * `kind: "floor"`, `bench/floor-proxy.ts`: that plus the least per-request work of a translating,
 * metering gateway, in plain code.
 */
export const startBareProxy = async (logDir: string, cpu: number, upstreamUrl: string, nodeArgs: ReadonlyArray<string> = [], kind: "bare" | "floor" = "bare", env: Record<string, string> = {}) => {
  const port = await freePort()
  return spawnPinned({
    name: `${kind}-proxy`,
    args: [...nodeArgs, join(ROOT, "bench", `${kind}-proxy.ts`), String(port), upstreamUrl],
    env,
    ready: /(?:bare|floor) proxy listening/,
    url: `http://127.0.0.1:${port}`,
    cpu,
    logDir
  })
}

/** Resident set size (VmRSS) of a process, in bytes. */
export const rssBytes = (pid: number): number => {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))
  return m === null ? Number.NaN : Number(m[1]) * 1024
}

const CLK_TCK = (() => {
  try {
    return Number(execFileSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).trim()) || 100
  } catch {
    return 100
  }
})()

/** User and system CPU time in a `/proc/…/stat` file, in microseconds (clock-tick resolution). */
const statMicros = (path: string) => {
  const stat = readFileSync(path, "utf8")
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
  // After "pid (comm) ": state is field 3, so utime (14) and stime (15) are at 11 and 12 here.
  return { user: (Number(fields[11]) / CLK_TCK) * 1e6, sys: (Number(fields[12]) / CLK_TCK) * 1e6 }
}

/** User + system CPU time a process has used so far, in microseconds (clock-tick resolution). */
export const cpuMicros = (pid: number): number => {
  const { user, sys } = statMicros(`/proc/${pid}/stat`)
  return user + sys
}

/**
 * One thread's CPU so far, in microseconds: user and system time (clock ticks), the time the
 * scheduler counted it running (`schedstat`, ns-precise), and how many times it was put on a core
 * (`schedstat`'s third field: each wake-up from a wait, each return after preemption).
 */
export const threadMicros = (pid: number, tid: number) => {
  const schedstat = readFileSync(`/proc/${pid}/task/${tid}/schedstat`, "utf8").split(" ")
  return { ...statMicros(`/proc/${pid}/task/${tid}/stat`), ran: Number(schedstat[0]) / 1000, slices: Number(schedstat[2]) }
}

export const randomToken = (bytes = 12) => randomBytes(bytes).toString("hex")

const psql = (url: string, statement: string) =>
  execFileSync("psql", [url, "-v", "ON_ERROR_STOP=1", "-qAtc", statement], { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] })

/** A fresh PostgreSQL database for the two-instance arm; returns its URL and a dropper. */
export const freshDatabase = (adminUrl: string) => {
  const name = `gw_bench_${randomToken(6)}`
  psql(adminUrl, `CREATE DATABASE ${name}`)
  const url = new URL(adminUrl)
  url.pathname = `/${name}`
  return {
    url: url.toString(),
    drop: () => {
      try {
        psql(adminUrl, `DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)
      } catch {
        // best effort
      }
    }
  }
}

/** Deletes every Redis key under a prefix (best effort). */
export const clearRedisPrefix = (redisUrl: string, prefix: string) => {
  try {
    const keys = execFileSync("redis-cli", ["-u", redisUrl, "--scan", "--pattern", `${prefix}*`], { encoding: "utf8" })
      .split("\n").filter((k) => k !== "")
    for (let i = 0; i < keys.length; i += 500) {
      execFileSync("redis-cli", ["-u", redisUrl, "del", ...keys.slice(i, i + 500)], { stdio: "ignore" })
    }
  } catch {
    // best effort
  }
}

export const serviceVersions = (postgresUrl: string, redisUrl: string) => {
  const get = (f: () => string) => {
    try {
      return f()
    } catch {
      return null
    }
  }
  return {
    postgres: get(() => psql(postgresUrl, "SHOW server_version").trim()),
    redis: get(() => /redis_version:(\S+)/.exec(execFileSync("redis-cli", ["-u", redisUrl, "info", "server"], { encoding: "utf8" }))?.[1] ?? "?")
  }
}

export const reachable = (what: "postgres" | "redis", url: string): boolean => {
  try {
    if (what === "postgres") psql(url, "SELECT 1")
    else execFileSync("redis-cli", ["-u", url, "ping"], { stdio: "ignore", timeout: 5000 })
    return true
  } catch {
    return false
  }
}

/** `NAME=VALUE` pairs (the benches' `--env`) as an environment. */
export const envPairs = (pairs: ReadonlyArray<string>): Record<string, string> =>
  Object.fromEntries(pairs.map((pair) => [pair.slice(0, pair.indexOf("=")), pair.slice(pair.indexOf("=") + 1)]))

/**
 * The gateway of the large-payload benches (`big-body.ts`, `big-answer.ts`): `models` on core 0
 * with the event-loop probe (and its CPU-stretch timer), a plan whose limits never bind, warnings
 * only in its log; `prof` adds `--cpu-prof` into that directory.
 */
export const startProbedGateway = (logDir: string, models: ReadonlyArray<unknown>, options: { readonly prof?: string | undefined; readonly nodeArgs: string; readonly env: ReadonlyArray<string> }) =>
  startGateway({
    name: "gateway",
    config: {
      models,
      embeddingModels: [],
      plans: { bench: { allowanceUsd: 1_000_000_000, rpm: 10_000_000, tpm: 1e15, concurrency: 100_000 } },
      defaultPlan: "bench"
    },
    adminToken: randomToken(),
    logDir,
    cpu: 0,
    nodeArgs: [
      ...LOOP_PROBE,
      ...(options.prof !== undefined ? ["--cpu-prof", `--cpu-prof-dir=${options.prof}`] : []),
      ...options.nodeArgs.split(" ").filter((arg) => arg !== "")
    ],
    env: { GATEWAY_LOG_LEVEL: "warn", BENCH_PROBE_CPU_MS: "2", ...envPairs(options.env) }
  })
