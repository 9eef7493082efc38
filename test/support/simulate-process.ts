/**
 * Starts the real standalone simulator (`gateway simulate --port 0`), an upstream that speaks the
 * Anthropic and OpenAI wire formats, and returns its address plus fault control: as a child
 * process (`startSimulateUpstream`), or the same server (`simulateServer`, what the command runs)
 * in the test's process (`startInProcessSimulateUpstream`), for suites where it only stands in for
 * an upstream and its process is not the subject. A process start costs ~1 s of CPU on this
 * 2-core machine; the simulator's own suite (backends/openai-compatible/simulate.test.ts) keeps
 * the process.
 */
import { Console, Effect, Fiber, Layer } from "effect"
import { type ChildProcess, spawn } from "node:child_process"
import { join } from "node:path"
import { simulateServer } from "../../src/simulate/server.ts"
import { capturingConsole } from "./in-process-gateway.ts"

const MAIN = join(import.meta.dirname, "..", "..", "src", "main.ts")

export interface SimulateUpstream {
  readonly baseUrl: string
  setFaults(faults: { mode: string; status?: number }): Promise<void>
  stop(): Promise<void>
}

export const startSimulateUpstream = async (apiKey: string): Promise<SimulateUpstream> => {
  const child: ChildProcess = spawn(process.execPath, [MAIN, "simulate", "--port", "0", "--api-key", apiKey], { stdio: ["ignore", "pipe", "pipe"] })
  let output = ""
  child.stderr!.on("data", (d) => (output += d))
  const baseUrl = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`simulator did not start:\n${output}`)), 30_000)
    child.stdout!.on("data", (d) => {
      output += d
      const m = /simulator listening on (http:\/\/\S+)/.exec(output)
      if (m) {
        clearTimeout(timer)
        resolve(m[1])
      }
    })
    child.once("exit", (code) => reject(new Error(`simulator exited with ${code}:\n${output}`)))
  })
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()))
  return {
    baseUrl,
    setFaults: (faults) => setFaultsAt(baseUrl, faults),
    stop: async () => {
      if (child.exitCode === null) child.kill("SIGTERM")
      await exited
    }
  }
}

/** Sets a simulator's faults through its admin route. */
const setFaultsAt = async (baseUrl: string, faults: unknown) => {
  const res = await fetch(`${baseUrl}/_simulator/faults`, { method: "POST", body: JSON.stringify(faults) })
  if (res.status !== 200) throw new Error(`setting faults failed: ${res.status} ${await res.text()}`)
}

/** The same server in this process, listening on a free port over real HTTP. */
export const startInProcessSimulateUpstream = async (apiKey: string): Promise<SimulateUpstream> => {
  let output = ""
  let listening: (baseUrl: string) => void = () => {}
  const listened = new Promise<string>((resolve) => (listening = resolve))
  const server = simulateServer({ host: "127.0.0.1", port: 0, ttftMs: 0, tokensPerSecond: 0, apiKey }).pipe(
    Layer.provide(Layer.succeed(Console.Console)(capturingConsole((line) => {
      output += line
      const m = /simulator listening on (http:\/\/\S+)/.exec(line)
      if (m) listening(m[1])
    })))
  )
  const fiber = Effect.runFork(Layer.launch(server))
  const baseUrl = await Promise.race([
    listened,
    Fiber.await(fiber).pipe(Effect.runPromise).then((exit) => {
      throw new Error(`in-process simulator stopped before listening: ${String(exit)}\n${output}`)
    })
  ])
  return {
    baseUrl,
    setFaults: (faults) => setFaultsAt(baseUrl, faults),
    stop: async () => {
      await Effect.runPromise(Fiber.interrupt(fiber))
    }
  }
}
