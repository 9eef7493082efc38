/**
 * The JSON logger alone: one object per line, request fields spread into the line, errors and
 * defects with their cause, annotations as fields, lines written together; to a stream whose reader
 * has stalled, at most a bounded amount left unread.
 */
import { Effect, Logger, Schema } from "effect"
import { spawn } from "node:child_process"
import { join } from "node:path"
import { describe, expect, it } from "vitest"
import { LogFields, makeJsonLogger, streamSink } from "../../src/observability/json-logger.ts"

class StorageDown extends Schema.TaggedError<StorageDown>()("StorageDown", { message: Schema.String }) {}

const logged = async (program: Effect.Effect<void>) => {
  const writes: Array<string> = []
  await Effect.runPromise(program.pipe(Effect.provide(Logger.layer([makeJsonLogger((text) => writes.push(text))]))))
  await new Promise((r) => setTimeout(r, 150)) // lines are written every 100 ms
  return { writes, lines: writes.join("").split("\n").filter((l) => l !== "").map((l) => JSON.parse(l) as Record<string, unknown>) }
}

describe("JSON logger", () => {
  it("writes one JSON object per line, lines logged together in one write", async () => {
    const { writes, lines } = await logged(Effect.gen(function*() {
      yield* Effect.logInfo(new LogFields("request", { request_id: "req_1", status: 200 }))
      yield* Effect.logWarning("plain text", { detail: 2 })
      yield* Effect.logInfo("annotated").pipe(Effect.annotateLogs("run_id", "run_1"))
    }))
    expect(writes).toHaveLength(1)
    expect(lines[0]).toMatchObject({ level: "info", msg: "request", request_id: "req_1", status: 200 })
    expect(Date.parse(lines[0].time as string)).not.toBeNaN()
    expect(lines[1]).toMatchObject({ level: "warn", msg: "plain text {\"detail\":2}" })
    expect(lines[2]).toMatchObject({ level: "info", msg: "annotated", run_id: "run_1" })
  })

  it("writes request fields as they are, escaped; unserializable or annotated ones through the general path", async () => {
    const { lines } = await logged(Effect.gen(function*() {
      yield* Effect.logInfo(new LogFields("request", {}))
      yield* Effect.logInfo(new LogFields("req \"q\"", { path: "/v1/x?\"\n\u2028", n: 1, nested: { a: [1, null] } }))
      yield* Effect.logInfo(new LogFields("request", { big: 1n }))
      yield* Effect.logInfo(new LogFields("request", { status: 200 })).pipe(Effect.annotateLogs("run_id", "run_1"))
    }))
    expect(Object.keys(lines[0])).toEqual(["time", "level", "msg"])
    expect(lines[1]).toEqual({ time: lines[1].time, level: "info", msg: "req \"q\"", path: "/v1/x?\"\n\u2028", n: 1, nested: { a: [1, null] } })
    expect(Object.keys(lines[1]).slice(0, 3)).toEqual(["time", "level", "msg"])
    expect(lines[2]).toMatchObject({ level: "info", msg: "request", note: "fields not serializable" })
    expect(lines[3]).toMatchObject({ level: "info", msg: "request", status: 200, run_id: "run_1" })
  })

  it("logs an error with its cause, and a defect with its stack", async () => {
    const { lines } = await logged(Effect.gen(function*() {
      yield* Effect.logError("storage failure", new StorageDown({ message: "connection refused" }))
      yield* Effect.die(new Error("boom")).pipe(Effect.catchCause((cause) => Effect.logError("request failed", cause)))
    }))
    expect(lines[0]).toMatchObject({ level: "error", msg: "storage failure connection refused" })
    expect(lines[0].cause).toContain("connection refused")
    expect(lines[1].msg).toBe("request failed")
    expect(lines[1].cause).toContain("Error: boom")
    expect(lines[1].cause).toContain("json-logger.test.ts") // the stack
  })

  it("prints request fields through any other logger too", () => {
    expect(JSON.parse(JSON.stringify(new LogFields("request", { status: 404 })))).toEqual({ msg: "request", status: 404 })
  })
})

/** A process reading its stdin only once told to (SIGUSR2), echoing what it reads to its stdout. */
const stalledReader = async () => {
  const reader = spawn(process.execPath, ["-e", `
    process.stdin.pause()
    const alive = setInterval(() => {}, 1000)
    process.on("SIGUSR2", () => process.stdin.pipe(process.stdout).on("finish", () => clearInterval(alive)))
    process.stdout.write("ready\\n")
  `], { stdio: ["pipe", "pipe", "inherit"] })
  let out = ""
  reader.stdout.setEncoding("utf8").on("data", (text: string) => (out += text))
  await expect.poll(() => out).toBe("ready\n")
  return { reader, read: () => out.slice("ready\n".length) }
}

describe("JSON logger, writing to a stream nobody reads", () => {
  it("keeps at most its limit unread, drops the rest, and says how many lines it dropped once the reader catches up", async () => {
    const { reader, read } = await stalledReader()
    try {
      const limit = 256 * 1024
      const sink = streamSink(reader.stdin, limit)
      const line = `${"x".repeat(1023)}\n`
      for (let i = 0; i < 2_000; i++) sink(line)
      // 2 MB written, none of it read: at most the limit waits in this process (the pipe holds more).
      expect(reader.stdin.writableLength).toBeLessThan(limit + line.length)
      process.kill(reader.pid!, "SIGUSR2")
      await expect.poll(() => read().includes("log lines dropped")).toBe(true)
      const lines = read().split("\n").filter((l) => l !== "")
      const notice = JSON.parse(lines.at(-1)!) as { level: string; dropped_lines: number }
      const kept = lines.length - 1
      expect(notice.level).toBe("warn")
      expect(kept).toBeGreaterThan(limit / line.length)
      expect(kept + notice.dropped_lines).toBe(2_000)
      // Then lines are written again.
      sink(line)
      await expect.poll(() => read().split("\n").filter((l) => l !== "").length).toBe(lines.length + 1)
    } finally {
      reader.kill()
    }
  })
})

describe("JSON logger, at exit with stdout gone", () => {
  it("drops the lines still buffered instead of failing the exit", async () => {
    // A process whose stdout reader has gone logs a line and exits before the 100 ms flush: the
    // line is written at exit, into the closed pipe.
    const child = spawn(process.execPath, ["--input-type=module", "-e", `
      import { Effect, Logger } from "effect"
      import { makeJsonLogger } from ${JSON.stringify(join(import.meta.dirname, "..", "..", "src", "observability", "json-logger.ts"))}
      process.stdout.on("error", () => {})
      await new Promise((resolve) => setTimeout(resolve, 500))
      await Effect.runPromise(Effect.logInfo("last words").pipe(Effect.provide(Logger.layer([makeJsonLogger()]))))
      process.exit(0)
    `], { cwd: join(import.meta.dirname, "..", ".."), stdio: ["ignore", "pipe", "pipe"] })
    child.stdout.destroy()
    let stderr = ""
    child.stderr.setEncoding("utf8").on("data", (text: string) => (stderr += text))
    const code = await new Promise<number | null>((resolve) => child.once("exit", resolve))
    expect({ code, stderr }).toEqual({ code: 0, stderr: "" })
  })
})
