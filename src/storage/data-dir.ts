/**
 * The data directory: created on demand (mode 0700), and locked by one process at a time while
 * the embedded database is open, because PGlite files must never be opened by two processes.
 */
import { Effect, Schema } from "effect"
import { mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { join } from "node:path"

export class DataDirLocked extends Schema.TaggedError<DataDirLocked>()("DataDirLocked", {
  dataDir: Schema.String,
  pid: Schema.Int
}) {
  override get message(): string {
    return `the data directory ${this.dataDir} is in use by gateway process ${this.pid}; ` +
      `stop it first, or use the admin API (/admin/v1/keys) of the running server`
  }
}

export const ensureDataDir = (dataDir: string) =>
  Effect.sync(() => mkdirSync(dataDir, { recursive: true, mode: 0o700 }))

const isAlive = (pid: number) => {
  try {
    process.kill(pid, 0)
    return true
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM"
  }
}

/** Holds `<dataDir>/gateway.lock` for the lifetime of the scope; a stale lock (dead pid) is taken over. */
export const lockDataDir = (dataDir: string) =>
  Effect.acquireRelease(
    Effect.gen(function*() {
      yield* ensureDataDir(dataDir)
      const file = join(dataDir, "gateway.lock")
      for (let attempt = 0; attempt < 2; attempt++) {
        try {
          writeFileSync(file, String(process.pid), { flag: "wx", mode: 0o600 })
          return file
        } catch (error) {
          if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error
          const pid = Number.parseInt(readFileSync(file, "utf8"), 10)
          if (Number.isInteger(pid) && pid !== process.pid && isAlive(pid)) {
            return yield* new DataDirLocked({ dataDir, pid })
          }
          rmSync(file, { force: true })
        }
      }
      return yield* new DataDirLocked({ dataDir, pid: -1 })
    }),
    (file) => Effect.sync(() => rmSync(file, { force: true }))
  )
