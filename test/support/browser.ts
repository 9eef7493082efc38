/**
 * A real browser for end-to-end tests: Debian's Chromium driven by playwright-core, headless. One
 * Chromium process serves every browser a test file opens at once; each `launchBrowser()` is a
 * fresh context in it (its own cookies, storage and permissions, like a separate profile), which
 * costs a fraction of a new process. `.ci/run` installs Chromium when it is missing; a local run
 * without it skips the browser suites (CI=true makes that a failure, like the services).
 */
import { existsSync } from "node:fs"
import { type Browser as ChromiumBrowser, type BrowserContext, chromium } from "playwright-core"

export const CHROMIUM = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium"
export const chromiumAvailable = existsSync(CHROMIUM)

const FLAGS = [
  "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
  "--disable-background-networking", "--disable-component-update", "--disable-sync"
]

export interface Browser {
  readonly context: BrowserContext
  close(): Promise<void>
}

/** The shared process and how many contexts use it; it exits when the last one closes. */
let shared: { process: Promise<ChromiumBrowser>; users: number } | undefined

const acquire = () => {
  shared ??= { process: chromium.launch({ executablePath: CHROMIUM, headless: true, args: FLAGS }), users: 0 }
  shared.users++
  return shared
}

const release = async (owner: NonNullable<typeof shared>) => {
  owner.users--
  if (owner.users > 0) return
  if (shared === owner) shared = undefined
  await (await owner.process).close().catch(() => {})
}

export const launchBrowser = async (options: { viewport?: { width: number; height: number } } = {}): Promise<Browser> => {
  const owner = acquire()
  let context: BrowserContext
  try {
    context = await (await owner.process).newContext({
      viewport: options.viewport ?? { width: 1280, height: 860 },
      locale: "en-US",
      timezoneId: "UTC",
      colorScheme: "light"
    })
  } catch (error) {
    await release(owner)
    throw error
  }
  return {
    context,
    close: async () => {
      await context.close().catch(() => {})
      await release(owner)
    }
  }
}
