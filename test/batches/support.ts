/** Helpers for the batch suites: keys, JSONL, and waiting on a batch's state (polling, no sleeps that decide). */
import type { GatewayHandle } from "../support/gateway-process.ts"

export const keyFor = async (gw: GatewayHandle, name: string, plan = "pro") =>
  ((await (await gw.admin("POST", "/admin/v1/keys", { name, plan })).json()) as { key: string }).key

export const parseJsonl = (text: string): Array<any> => text.split("\n").filter((l) => l.trim() !== "").map((l) => JSON.parse(l))

/** Polls `get` until `done` holds; fails with the last state after `timeoutMs`. */
export const waitForBatch = async <B>(get: () => Promise<B>, done: (batch: B) => boolean, timeoutMs = 60_000): Promise<B> => {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const batch = await get()
    if (done(batch)) return batch
    if (Date.now() > deadline) throw new Error(`batch did not reach the expected state: ${JSON.stringify(batch)}`)
    await new Promise((r) => setTimeout(r, 100))
  }
}
