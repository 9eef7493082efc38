/**
 * `npm test`: the type check and vitest at once. The type check is `tsc --noEmit` over the
 * gateway's project and then the dashboard's (incremental: build info in `.cache/tsc/`); it used to
 * run before vitest, adding its whole time to the run (~3 s on a warm tree, ~10 s in a clean clone)
 * while vitest's first seconds and its last file leave a core idle. Now it runs beside vitest; its
 * output is printed when it ends (at once when it fails), and the run fails if either fails.
 * Arguments go to vitest (`npm test -- test/http` runs that folder, still type-checked).
 */
import { type ChildProcess, spawn } from "node:child_process"
import { join } from "node:path"

const root = join(import.meta.dirname, "..")
const bin = (name: string) => join(root, "node_modules", ".bin", name)

const children: Array<ChildProcess> = []
for (const signal of ["SIGINT", "SIGTERM"] as const) {
  process.once(signal, () => {
    for (const child of children) child.kill(signal)
  })
}

/** Runs a command; resolves its exit code (1 when it was killed by a signal) and, when captured, its output. */
const run = (command: string, args: ReadonlyArray<string>, capture: boolean) => {
  const child = spawn(command, args, { cwd: root, stdio: capture ? ["ignore", "pipe", "pipe"] : "inherit" })
  children.push(child)
  let output = ""
  child.stdout?.on("data", (chunk) => (output += chunk))
  child.stderr?.on("data", (chunk) => (output += chunk))
  return new Promise<{ code: number; output: string }>((resolve) => {
    child.once("error", (error) => resolve({ code: 1, output: `${output}${error.message}\n` }))
    child.once("close", (code) => resolve({ code: code ?? 1, output }))
  })
}

const typeCheck = async () => {
  const startedAt = performance.now()
  for (const [project, info] of [[".", "main"], ["dashboard", "dashboard"]] as const) {
    // One checker thread: beside vitest, which keeps both cores busy, tsc's parallel checkers only
    // add work (a cold check of the gateway's project, alone on this 2-core machine: 13.9 s of
    // CPU and 7.8 s of wall time with its threads, 9.0 s and 7.4 s single-threaded; 2026-12-01).
    const result = await run(bin("tsc"), ["--noEmit", "-p", project, "--singleThreaded", "--incremental", "--tsBuildInfoFile", `.cache/tsc/${info}.tsbuildinfo`], true)
    if (result.code !== 0) {
      process.stdout.write(`\n✗ type check failed (tsc -p ${project}):\n${result.output}\n`)
      return false
    }
  }
  process.stdout.write(`\n✓ type check passed (tsc, ${((performance.now() - startedAt) / 1000).toFixed(1)} s)\n`)
  return true
}

const [typed, tested] = await Promise.all([typeCheck(), run(bin("vitest"), ["run", ...process.argv.slice(2)], false)])
if (!typed) process.stdout.write("✗ the type check failed (its errors are above)\n")
process.exitCode = tested.code !== 0 ? tested.code : typed ? 0 : 1
