/**
 * Starts the real gateway as a child process (`node src/main.ts serve`) on a free port and reads
 * the first API key it prints. Used by every integration test: the same binary users run.
 */
import { type ChildProcess, spawn } from "node:child_process"
import { readFileSync } from "node:fs"
import { join } from "node:path"

const NODE = process.execPath
const MAIN = join(import.meta.dirname, "..", "..", "src", "main.ts")

/** A running gateway as its tests see it: a child process (here) or in process (in-process-gateway.ts). */
export interface GatewayHandle {
  readonly baseUrl: string
  /** The first API key printed on a fresh data dir (undefined after a restart). */
  readonly apiKey: string | undefined
  readonly adminToken: string
  /** Everything it printed so far (stdout and stderr). */
  readonly output: () => string
  /** A graceful stop (SIGTERM for a process, or the given signal); resolves the exit code. */
  stop(signal?: NodeJS.Signals): Promise<number | null>
  /** Admin API call helper. */
  admin(method: string, path: string, body?: unknown): Promise<Response>
}

export interface GatewayProcess extends GatewayHandle {
  readonly child: ChildProcess
}

/**
 * `launcher`: a command that runs node in its place and execs it (so the child is node itself),
 * e.g. `["prlimit", "--nofile=1024:1024"]`. `nodeArgs`: node's own flags, for those node does not
 * take in NODE_OPTIONS (V8's logging and tracing flags).
 */
export const startGateway = async (
  env: Record<string, string>,
  args: ReadonlyArray<string> = [],
  launcher: ReadonlyArray<string> = [],
  nodeArgs: ReadonlyArray<string> = []
): Promise<GatewayProcess> => {
  const command = [...launcher, NODE, ...nodeArgs, MAIN, "serve", "--port", "0", ...args]
  const child = spawn(command[0], command.slice(1), {
    env: { ...process.env, CI: "", HOST: "127.0.0.1", ...env },
    stdio: ["ignore", "pipe", "pipe"]
  })
  let output = ""
  child.stdout!.on("data", (d) => (output += d))
  child.stderr!.on("data", (d) => (output += d))
  const baseUrl = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill("SIGKILL") // never leave a half-started gateway behind
      reject(new Error(`gateway did not start in time:\n${output}`))
    }, 45_000)
    const onData = () => {
      const m = /gateway listening on (http:\/\/\S+)/.exec(output)
      if (m) {
        clearTimeout(timer)
        resolve(m[1])
      }
    }
    child.stdout!.on("data", onData)
    child.once("exit", (code) => {
      clearTimeout(timer)
      reject(new Error(`gateway exited with ${code} before listening:\n${output}`))
    })
  })
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)))
  return {
    ...gatewayHandle(baseUrl, env, () => output, async (signal = "SIGTERM") => {
      if (child.exitCode === null) child.kill(signal)
      return exited
    }),
    child
  }
}

/** An admin API caller with the admin token (JSON bodies). */
export const adminCaller = (baseUrl: string, adminToken: string) => (method: string, path: string, body?: unknown) =>
  fetch(`${baseUrl}${path}`, {
    method,
    headers: { authorization: `Bearer ${adminToken}`, "content-type": "application/json" },
    ...(body === undefined ? {} : { body: JSON.stringify(body) })
  })

/**
 * A started gateway as its tests see it, however it runs: the first API key it printed, the admin
 * token (given in the environment, else the one it wrote to its data dir), the admin API.
 */
export const gatewayHandle = (
  baseUrl: string,
  env: Record<string, string>,
  output: () => string,
  stop: GatewayHandle["stop"]
): GatewayHandle => {
  const adminToken = env.GATEWAY_ADMIN_TOKEN ?? readFileSync(join(env.GATEWAY_DATA_DIR!, "admin-token"), "utf8").trim()
  return {
    baseUrl,
    apiKey: /first API key \(shown once, store it now\): (svc_\S+)/.exec(output())?.[1],
    adminToken,
    output,
    stop,
    admin: adminCaller(baseUrl, adminToken)
  }
}

/** Runs `node src/main.ts <args>` to completion. */
export const runCli = (args: ReadonlyArray<string>, env: Record<string, string>) =>
  new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
    const child = spawn(NODE, [MAIN, ...args], { env: { ...process.env, CI: "", ...env }, stdio: ["ignore", "pipe", "pipe"] })
    let stdout = ""
    let stderr = ""
    child.stdout.on("data", (d) => (stdout += d))
    child.stderr.on("data", (d) => (stderr += d))
    child.once("exit", (code) => resolve({ code, stdout, stderr }))
  })
