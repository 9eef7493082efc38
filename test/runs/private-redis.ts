/**
 * A redis-server of the test's own, on a free port, that the test may stop and start at will (the
 * shared Redis is never touched). No persistence: a restart comes back empty, as after a crash.
 */
import { type ChildProcess, spawn } from "node:child_process"
import { createServer, Socket } from "node:net"

const freePort = () =>
  new Promise<number>((resolve, reject) => {
    const server = createServer()
    server.once("error", reject)
    server.listen(0, "127.0.0.1", () => {
      const port = (server.address() as { port: number }).port
      server.close(() => resolve(port))
    })
  })

/** True once the server answers PING. */
const answers = (port: number) =>
  new Promise<boolean>((resolve) => {
    const socket = new Socket()
    const done = (ok: boolean) => {
      socket.destroy()
      resolve(ok)
    }
    socket.setTimeout(500, () => done(false))
    socket.once("error", () => done(false))
    socket.connect(port, "127.0.0.1", () => socket.write("PING\r\n"))
    socket.once("data", (data) => done(data.toString().startsWith("+PONG")))
  })

export interface PrivateRedis {
  readonly port: number
  readonly url: string
  /** Starts the server (again) on the same port; resolves once it answers. */
  start(): Promise<void>
  /** Kills the server; resolves once it is gone. */
  stop(): Promise<void>
}

export const privateRedis = async (): Promise<PrivateRedis> => {
  const port = await freePort()
  let child: ChildProcess | undefined
  const stop = async () => {
    const running = child
    child = undefined
    if (running === undefined || running.exitCode !== null) return
    const exited = new Promise<void>((resolve) => running.once("exit", () => resolve()))
    running.kill("SIGKILL")
    await exited
  }
  const start = async () => {
    await stop()
    child = spawn("redis-server", ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--daemonize", "no"], {
      stdio: "ignore"
    })
    const deadline = Date.now() + 10_000
    while (!(await answers(port))) {
      if (Date.now() > deadline) throw new Error(`redis-server on port ${port} did not start`)
      await new Promise((r) => setTimeout(r, 50))
    }
  }
  return { port, url: `redis://127.0.0.1:${port}`, start, stop }
}
