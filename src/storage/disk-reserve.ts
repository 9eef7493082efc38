/**
 * Room kept back for the embedded database on its own disk: a file of zeros in the data dir
 * (`disk-reserve`, `GATEWAY_DISK_RESERVE_MB`, 32 by default) given up the moment the disk fills.
 *
 * On a full disk Postgres cannot add a page to a table nor start a new WAL segment (16 MB): every
 * write fails until there is room (8 clients renaming a key: 30,573 × 503 in a minute), and it
 * cannot start again either, since its recovery writes too. The usage rows of calls already
 * answered would wait in memory, be refused at shutdown and be lost. With the reserve,
 * the first statement refused for a full disk (SQLSTATE 53100, seen by the database's thread) frees
 * it: the ledger's next flush, a retried write, a segment switch and a restart find room, while the
 * operator, told in an error log line, frees space. A start that fails on a nearly full disk frees
 * it and tries once more. It is made again at a later start, once the disk has room for it and
 * `LOW_DISK_BYTES` more.
 *
 * 32 MiB: two WAL segments, or a WAL switch and well over 10,000 usage rows; written in the
 * background after the database opens (a fresh data dir's first start), a MiB at a time.
 */
import { Effect } from "effect"
import { existsSync, statfsSync, statSync, unlinkSync } from "node:fs"
import { open } from "node:fs/promises"
import { dirname, join } from "node:path"

const RESERVE_FILE = "disk-reserve"
const WRITE_BYTES = 1024 * 1024

const freeBytes = (dir: string): number => {
  const { bavail, bsize } = statfsSync(dir)
  return bavail * bsize
}

/**
 * Below this much free space, a database that fails to open or write is said to be short of disk.
 * A new data directory takes ~40 MB; Postgres writes its WAL 16 MB a segment at a time.
 */
export const LOW_DISK_BYTES = 64 * 1024 * 1024

/**
 * Words to add to a database failure when the file system holding `path` (or its nearest existing
 * folder) has less than `LOW_DISK_BYTES` free, else "". PGlite's own message for a Postgres that
 * cannot write at start is only "Aborted()", which tells an operator nothing.
 */
export const lowDiskNote = (path: string): string => {
  let dir = path
  while (!existsSync(dir) && dirname(dir) !== dir) dir = dirname(dir)
  try {
    const free = freeBytes(dir)
    if (free >= LOW_DISK_BYTES) return ""
    return ` (the disk holding ${path} has ${(free / 1024 / 1024).toFixed(1)} MiB free: free some space, or move the data directory, and start again)`
  } catch {
    return ""
  }
}

export const reservePath = (dataDir: string) => join(dataDir, RESERVE_FILE)

/** Frees the reserve; true when there was one to free. */
export const releaseReserve = (dataDir: string): boolean => {
  try {
    unlinkSync(reservePath(dataDir))
    return true
  } catch {
    return false
  }
}

const reserveBytes = (dataDir: string): number => {
  try {
    return statSync(reservePath(dataDir)).size
  } catch {
    return 0
  }
}

/** Writes a reserve of `bytes` zeros (over a short one), or removes it when it could not be made whole. */
const writeReserve = async (path: string, bytes: number) => {
  const file = await open(path, "w", 0o600)
  try {
    const zeros = Buffer.alloc(WRITE_BYTES)
    for (let at = 0; at < bytes; at += WRITE_BYTES) await file.write(zeros, 0, Math.min(WRITE_BYTES, bytes - at))
    await file.sync()
  } catch (error) {
    await file.close().catch(() => undefined)
    unlinkSync(path)
    throw error
  }
  await file.close()
}

/**
 * Makes the reserve when it is missing (or short) and the disk has room for it and
 * `LOW_DISK_BYTES` more; says so in a warning when it has not. `megabytes` 0: none is kept (and
 * one left by an earlier start is removed).
 */
export const keepReserve = (dataDir: string, megabytes: number) =>
  Effect.gen(function*() {
    const bytes = megabytes * 1024 * 1024
    const path = reservePath(dataDir)
    if (bytes === 0) {
      releaseReserve(dataDir)
      return
    }
    const held = reserveBytes(dataDir)
    if (held >= bytes) return
    if (freeBytes(dataDir) + held < bytes + LOW_DISK_BYTES) {
      return yield* Effect.logWarning(
        `embedded database: the disk holding ${dataDir} has under ${((bytes + LOW_DISK_BYTES) / 1024 / 1024).toFixed(0)} MiB free: ` +
          "no reserve is kept for a full disk (GATEWAY_DISK_RESERVE_MB); free some space"
      )
    }
    yield* Effect.tryPromise(() => writeReserve(path, bytes)).pipe(
      Effect.catch((error) => Effect.logWarning(`embedded database: could not write the disk reserve ${path}`, error))
    )
  })
