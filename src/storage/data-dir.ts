/**
 * The data directory: created on demand (mode 0700), and locked by one process at a time while
 * the embedded database is open, because PGlite files must never be opened by two processes.
 */
import { Effect, Schema } from "effect"
import { mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { lowDiskNote, releaseReserve } from "./disk-reserve.ts"

class DataDirLocked extends Schema.TaggedError<DataDirLocked>()("DataDirLocked", {
  dataDir: Schema.String,
  pid: Schema.Int
}) {
  override get message(): string {
    return `the data directory ${this.dataDir} is in use by gateway process ${this.pid}; ` +
      `stop it first, or use the admin API (/admin/v1/keys) of the running server`
  }
}

/** Why a data directory could not be made, in words (Node's own message names only a syscall and a code). */
const cannotMake = (dataDir: string, error: unknown) => {
  const code = (error as NodeJS.ErrnoException).code
  const why = code === "EEXIST" || code === "ENOTDIR" ? "a file is in the way (it, or a folder above it, is not a directory)"
    : code === "EACCES" || code === "EPERM" ? "permission denied"
    : code === "EROFS" ? "the file system is read-only"
    : (error as Error).message
  return new Error(`cannot use ${dataDir} as the data directory (GATEWAY_DATA_DIR, or \`dataDir\` when embedded): ${why}`)
}

/** Makes the data directory (mode 0700) if it is not there; a failure says why, naming the setting. */
const makeDataDir = (dataDir: string) => {
  try {
    mkdirSync(dataDir, { recursive: true, mode: 0o700 })
  } catch (error) {
    throw cannotMake(dataDir, error)
  }
}

export const ensureDataDir = (dataDir: string) => Effect.sync(() => makeDataDir(dataDir))

const isAlive = (pid: number) => {
  try {
    process.kill(pid, 0)
    return true
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM"
  }
}

/**
 * Takes `<dataDir>/gateway.lock` for this process (a stale lock, of a dead pid, is taken over; one
 * this process holds already stays as it is). Answers the pid of the live process that holds it
 * instead, or -1 when the lock could not be taken twice in a row. Synchronous: `serve` takes it
 * before it opens the database early (`embedded-database.ts` `openEarly`).
 */
export const takeDataDirLock = (dataDir: string): number | undefined => {
  makeDataDir(dataDir)
  const file = join(dataDir, "gateway.lock")
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      writeFileSync(file, String(process.pid), { flag: "wx", mode: 0o600 })
      return undefined
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code
      if (code !== "EEXIST") {
        // Made but not written (a full disk): not left behind as an empty lock.
        rmSync(file, { force: true })
        // The data dir's disk reserve is there for this (`disk-reserve.ts`): freed, and once more.
        if (code === "ENOSPC" && attempt === 0 && releaseReserve(dataDir)) continue
        throw new Error(`cannot write the data directory's lock ${file}: ${(error as Error).message}${lowDiskNote(dataDir)}`)
      }
      const pid = Number.parseInt(readFileSync(file, "utf8"), 10)
      // Ours already (taken before the database opened early): kept as it is, never let go in between.
      if (pid === process.pid) return undefined
      if (Number.isInteger(pid) && isAlive(pid)) return pid
      rmSync(file, { force: true })
    }
  }
  return -1
}

/**
 * Lets go of `<dataDir>/gateway.lock` if this process holds it (`takeDataDirLock`); a lock another
 * process took since is left alone.
 */
export const releaseDataDirLock = (dataDir: string) => {
  const file = join(dataDir, "gateway.lock")
  let holder: number
  try {
    holder = Number.parseInt(readFileSync(file, "utf8"), 10)
  } catch {
    return // no lock: nothing to let go
  }
  if (holder === process.pid) rmSync(file, { force: true })
}

/** Holds `<dataDir>/gateway.lock` for the lifetime of the scope (`takeDataDirLock`). */
export const lockDataDir = (dataDir: string) =>
  Effect.acquireRelease(
    Effect.gen(function*() {
      const holder = takeDataDirLock(dataDir)
      if (holder !== undefined) return yield* new DataDirLocked({ dataDir, pid: holder })
      return join(dataDir, "gateway.lock")
    }),
    (file) => Effect.sync(() => rmSync(file, { force: true }))
  )
