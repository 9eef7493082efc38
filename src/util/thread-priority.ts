/**
 * The embedded database's thread serves below the event loop's priority (`storage/embedded-worker.ts`).
 * A statement wakes that thread from the event loop's `postMessage`; at equal priority the kernel
 * often switches to the woken thread at once when the two share a core, and the event loop waits
 * out the statement. Measured with the gateway on one core (`bench/hot-path.ts`, 200 req/s, the
 * embedded ledger's flushes, timing each `postMessage`): 11–16 calls of 1–5 ms in 26 s at nice 0
 * (27–50 ms of stalls), 3–5 at nice 5, 0–1 at nice 10 and at 19. With a core to spare nothing
 * changes: the thread runs there.
 *
 * Only that thread: the tokenizer's and the artifact parser's threads run jobs a request is waiting
 * for, start to end. At nice 10 on a machine busy with other processes they get about a tenth of a
 * core: in a full test run a small count waited 1,150 ms behind a huge one (its bound: 1 s).
 */
import { readlinkSync } from "node:fs"
import { setPriority } from "node:os"

/**
 * A nice value (0 is the process's own, 19 the lowest). Under full contention a thread at 10 still
 * gets about a tenth of a core beside one at 0 (the kernel's weights 110 : 1024): its work is
 * late, never starved.
 */
const WORKER_THREAD_NICE = 10

/**
 * Lowers the calling thread's priority, not the process's: on Linux `setpriority` takes a thread
 * id, read from `/proc/thread-self`. Elsewhere (no such file) the thread keeps the process's.
 */
export const stepBackFromTheEventLoop = () => {
  try {
    const threadId = Number(readlinkSync("/proc/thread-self").split("/").at(-1))
    if (Number.isSafeInteger(threadId) && threadId > 0) setPriority(threadId, WORKER_THREAD_NICE)
  } catch {
    // Not Linux, or not permitted: running at the process's priority is correct, only less polite.
  }
}
