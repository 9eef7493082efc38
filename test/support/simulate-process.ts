/**
 * Starts the real standalone simulator (`gateway simulate --port 0`), an upstream that speaks the
 * Anthropic and OpenAI wire formats, and returns its address plus fault control.
 */
import { type ChildProcess, spawn } from "node:child_process"
import { join } from "node:path"

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
    setFaults: async (faults) => {
      const res = await fetch(`${baseUrl}/_simulator/faults`, { method: "POST", body: JSON.stringify(faults) })
      if (res.status !== 200) throw new Error(`setting faults failed: ${res.status} ${await res.text()}`)
    },
    stop: async () => {
      if (child.exitCode === null) child.kill("SIGTERM")
      await exited
    }
  }
}

