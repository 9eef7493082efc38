/**
 * Unpacks the embedded database's template in a thread of its own (`unpackTemplate` in
 * template.ts), so the ~40 MB it inflates through is freed when the thread ends instead of
 * fragmenting the main thread's malloc heap.
 */
import { parentPort, workerData } from "node:worker_threads"
import { extractTemplate } from "./template.ts"

const { file, dir } = workerData as { readonly file: string; readonly dir: string }
extractTemplate(file, dir).then(
  () => parentPort!.postMessage({ done: true }),
  (error: unknown) => parentPort!.postMessage({ error: error instanceof Error ? error.message : String(error) })
)
