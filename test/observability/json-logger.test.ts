/**
 * The JSON logger alone: one object per line, request fields spread into the line, errors and
 * defects with their cause, annotations as fields, lines written together.
 */
import { Effect, Logger, Schema } from "effect"
import { describe, expect, it } from "vitest"
import { LogFields, makeJsonLogger } from "../../src/observability/json-logger.ts"

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
