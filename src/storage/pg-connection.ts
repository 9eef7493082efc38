/**
 * What every PostgreSQL connection the gateway opens (its pool, an upload's parse worker) has
 * against a server that vanished or stalled:
 * - TCP keepalive after 10 s idle: a connection whose server vanished (a partition, a host gone
 *   without a reset) fails ~20 s after it went quiet (then libuv's 10 probes a second apart)
 *   instead of when the kernel gives up on it, minutes later;
 * - an answer deadline, the request path's longest storage wait (three `GATEWAY_STORAGE_TIMEOUT_MS`:
 *   `deadline.ts`): a statement that has had no byte of answer for that long fails its connection
 *   with a retryable error (`answerTimeout`, patched into `@effect/sql-pg`: `patches/`), so whoever
 *   waits on a server that is there but silent (a stall, a lock that never clears) gets a failure,
 *   not a wait without end.
 * Plain numbers (milliseconds), so a worker's target can carry them.
 */
import { longestStorageWaitMs } from "./deadline.ts"

export const connectionGuards = (storageTimeoutMs: number) => ({ keepAlive: 10_000, answerTimeout: longestStorageWaitMs(storageTimeoutMs) })

export type ConnectionGuards = ReturnType<typeof connectionGuards>
