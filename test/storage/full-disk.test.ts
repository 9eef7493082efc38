/**
 * The embedded database on a disk that fills up (a laptop's disk, or a small volume), for real: the
 * gateway's data directory on a tmpfs of its own, filled by a file while the gateway serves.
 * - a stored response that cannot be written is the store's outage, a retryable 503 — not a 400
 *   blaming the request (it was, until 2026-12-03) — and it frees the data dir's disk reserve
 *   (`storage/disk-reserve.ts`), so the client's retry is stored;
 * - model calls go on; their usage rows are written, and so is the ledger at shutdown (without the
 *   reserve, on a disk full from its start, every row waited in memory and was lost at the stop);
 * - a start on a full disk with no reserve left fails saying the disk is full (it said
 *   "ENOSPC: no space left on device, write" of its lock file, and PGlite's own word is "Aborted()");
 * - once space is freed, a restart serves, makes the reserve again, and the ledger holds a row for
 *   every answered call.
 * Mounting needs root and the capability to mount (CI on this project's machines has both); where a
 * probe mount fails, the file is skipped.
 */
import { execFileSync } from "node:child_process"
import { closeSync, existsSync, mkdtempSync, openSync, rmSync, statSync, writeSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import OpenAI from "openai"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { freshDataDir } from "../support/engines.ts"
import { fastConfigEnv } from "../support/fast-config.ts"
import { type GatewayProcess, runCli, startGateway } from "../support/gateway-process.ts"

/**
 * Whether this process may mount a tmpfs (root with the capability: CI on this project's machines;
 * not a user, nor root in an unprivileged container). Tried once, at collection.
 */
const canMount = (() => {
  if (process.getuid?.() !== 0) return false
  const probe = mkdtempSync(join(tmpdir(), "mount-probe-"))
  try {
    execFileSync("mount", ["-t", "tmpfs", "-o", "size=1m", "tmpfs", probe], { stdio: "ignore" })
    execFileSync("umount", [probe], { stdio: "ignore" })
    return true
  } catch {
    return false
  } finally {
    rmSync(probe, { recursive: true, force: true })
  }
})()

/** Writes zeros into `file` until the disk refuses (ENOSPC). */
const fillDisk = (file: string) => {
  const fd = openSync(file, "w")
  const chunk = Buffer.alloc(1024 * 1024)
  try {
    for (;;) writeSync(fd, chunk)
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "ENOSPC") throw error
  } finally {
    closeSync(fd)
  }
}

/** Resolves once the data dir's reserve is whole (it is written in the background after the database opens). */
const reserveMade = (dataDir: string) =>
  expect.poll(() => (existsSync(join(dataDir, "disk-reserve")) ? statSync(join(dataDir, "disk-reserve")).size : 0)).toBe(32 * 1024 * 1024)

describe.runIf(canMount)("the embedded database on a full disk", () => {
  let mountPoint: string
  let configDir: string
  let dataDir: string
  let env: Record<string, string>
  let gw: GatewayProcess | undefined
  const filler = (n: number) => join(mountPoint, `filler-${n}`)

  beforeAll(() => {
    // Outside the run's tmpfs directory, so it is unmounted even if that is removed first. Room for
    // the database (~40 MB) and its reserve with 64 MiB to spare, as the reserve asks.
    mountPoint = mkdtempSync(join(tmpdir(), "full-disk-"))
    execFileSync("mount", ["-t", "tmpfs", "-o", "size=160m", "tmpfs", mountPoint])
    configDir = freshDataDir()
    dataDir = join(mountPoint, "data")
    env = { GATEWAY_DATA_DIR: dataDir, GATEWAY_DISK_RESERVE_MB: "32", ...fastConfigEnv(configDir) }
  })
  afterAll(async () => {
    await gw?.stop()
    execFileSync("umount", [mountPoint])
    rmSync(mountPoint, { recursive: true, force: true })
    rmSync(configDir, { recursive: true, force: true })
  })

  it("answers 503 for what it cannot store and frees its reserve, serves on, says why it cannot start, and loses no usage", async () => {
    gw = await startGateway(env)
    await reserveMade(dataDir)
    const openai = new OpenAI({ apiKey: gw.apiKey!, baseURL: `${gw.baseUrl}/v1`, maxRetries: 0 })
    fillDisk(filler(1))

    // A stored response large enough that its row needs new pages of the table: the disk refuses them.
    const input = `say exactly: ok ${"x".repeat(300_000)}`
    const storeOnFullDisk = () => openai.responses.create({ model: "svc-atlas-1", input, store: true })
    // Which statement meets the full disk first frees the reserve: nearly always the response's row,
    // but the call's usage row is buffered before it and the ledger flushes every second, so now
    // and then the ledger's write comes first (one full run in ~6 on a loaded machine) and the
    // response's row finds the reserve's room. Then the disk is filled again (no reserve is left)
    // for the response's own refusal, and the call it answered counts in the usage below.
    const first = await storeOnFullDisk().then(() => "stored" as const, (error: unknown) => error)
    const ledgerFirst = first === "stored"
    if (ledgerFirst) {
      await expect.poll(() => gw!.output()).toContain("its 32 MiB reserve is freed")
      fillDisk(filler(3))
      await expect(storeOnFullDisk()).rejects.toMatchObject({ status: 503 })
      rmSync(filler(3))
    } else expect(first).toMatchObject({ status: 503 })
    expect(existsSync(join(dataDir, "disk-reserve"))).toBe(false)
    await expect.poll(() => gw!.output()).toContain("its 32 MiB reserve is freed")
    // The client's retry (the SDK's own, had it not been turned off) is stored.
    const stored = await openai.responses.create({ model: "svc-atlas-1", input, store: true })
    expect((await openai.responses.retrieve(stored.id)).id).toBe(stored.id)
    const chat = await openai.chat.completions.create({ model: "svc-atlas-1", messages: [{ role: "user", content: "say exactly: ok" }] })
    expect(chat.choices[0]!.message.content).toBeTruthy()
    expect(await gw.stop()).toBe(0)
    gw = undefined

    fillDisk(filler(2))
    const refused = await runCli(["serve", "--port", "0"], { ...env, HOST: "127.0.0.1" })
    expect(refused.code).not.toBe(0)
    expect(refused.stderr).toMatch(/has \d+\.\d MiB free: free some space/)

    rmSync(filler(1))
    rmSync(filler(2))
    gw = await startGateway(env)
    await reserveMade(dataDir)
    const usage = await (await gw.admin("GET", "/admin/v1/usage")).json() as { data: Array<{ requests: number }> }
    // The response the store refused (the model answered it: it is charged), its retry, the chat
    // completion — and the response stored on the reserve's room when the ledger met the disk first.
    expect(usage.data.reduce((sum, row) => sum + row.requests, 0)).toBe(ledgerFirst ? 4 : 3)
  })
})
