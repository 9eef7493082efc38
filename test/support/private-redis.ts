/**
 * A redis-server of the test's own, on a free port, without persistence: a test that wipes, kills
 * or restarts Redis does it to this one, never to the shared server other suites use.
 */
import { type ChildProcess, spawn } from "node:child_process"
import { Redis } from "ioredis"
import { freePort } from "./free-port.ts"

export interface PrivateRedis {
  readonly url: string
  readonly port: number
  /** FLUSHALL: every key gone, the server keeps running. */
  flushAll(): Promise<void>
  /** SIGKILL, then a new empty server on the same port (no persistence: nothing comes back). */
  restart(downMs?: number): Promise<void>
  /** SIGKILL; resolves once it is gone (an outage, until `start`). */
  stop(): Promise<void>
  /** A new empty server on the same port, after `stop`; resolves once it accepts connections. */
  start(): Promise<void>
  /** SIGSTOP: a stall (connections stay open, the kernel takes bytes, nothing answers) until `resume`. */
  pause(): void
  /** SIGCONT after `pause`: it answers again, its data intact. */
  resume(): void
}

const launch = (port: number) =>
  new Promise<ChildProcess>((resolve, reject) => {
    const child = spawn("redis-server", ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--daemonize", "no"], {
      stdio: ["ignore", "pipe", "pipe"]
    })
    let output = ""
    const timer = setTimeout(() => reject(new Error(`redis-server did not start:\n${output}`)), 10_000)
    const onData = (data: Buffer) => {
      output += data
      if (output.includes("Ready to accept connections")) {
        clearTimeout(timer)
        resolve(child)
      }
    }
    child.stdout!.on("data", onData)
    child.stderr!.on("data", onData)
    child.once("exit", (code) => {
      clearTimeout(timer)
      reject(new Error(`redis-server exited with ${code}:\n${output}`))
    })
  })

const kill = (child: ChildProcess) =>
  new Promise<void>((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) return resolve()
    child.once("exit", () => resolve())
    child.kill("SIGKILL")
  })

export const startPrivateRedis = async (): Promise<PrivateRedis> => {
  const port = await freePort()
  let child = await launch(port)
  const url = `redis://127.0.0.1:${port}`
  return {
    url,
    port,
    flushAll: async () => {
      const client = new Redis(url, { maxRetriesPerRequest: 1 })
      try {
        await client.flushall()
      } finally {
        client.disconnect()
      }
    },
    restart: async (downMs = 0) => {
      await kill(child)
      if (downMs > 0) await new Promise((r) => setTimeout(r, downMs))
      child = await launch(port)
    },
    stop: () => kill(child),
    start: async () => {
      await kill(child)
      child = await launch(port)
    },
    pause: () => void child.kill("SIGSTOP"),
    resume: () => void child.kill("SIGCONT")
  }
}
