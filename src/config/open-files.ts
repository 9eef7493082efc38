/**
 * The default connection cap (`GATEWAY_MAX_CONNECTIONS`). Every client connection takes a file
 * descriptor, and so do upstream calls, the database, Redis and worker threads: clients that may
 * open connections until the process's open-file limit leave the gateway none for its own work
 * (EMFILE), and every call fails. Node has no getrlimit; Linux shows the limit in
 * /proc/self/limits and the open descriptors in /proc/self/fd.
 */
import { readdirSync, readFileSync } from "node:fs"

/** The soft limit on open files; undefined when unlimited or not known (not Linux). */
const openFileLimit = (): number | undefined => {
  try {
    const match = /^Max open files\s+(\d+)\s/m.exec(readFileSync("/proc/self/limits", "utf8"))
    return match === null ? undefined : Number(match[1])
  } catch {
    return undefined
  }
}

const openFiles = (): number => {
  try {
    return readdirSync("/proc/self/fd").length
  } catch {
    return 0
  }
}

/** The fewest connections the default allows, however low the limit. */
const MIN_CONNECTIONS = 64

/**
 * The limit less what is open now (the gateway's own: database files, worker threads, ~150 on the
 * embedded engine) and a reserve for what it opens later (upstream calls, pooled connections) of a
 * quarter of the limit, at least 256; undefined (no cap) when the limit is not known. Read once
 * the services are up, just before the server listens.
 */
export const defaultMaxConnections = (): number | undefined => {
  const limit = openFileLimit()
  if (limit === undefined) return undefined
  return Math.max(MIN_CONNECTIONS, limit - openFiles() - Math.max(256, Math.floor(limit / 4)))
}
