/**
 * A real browser for end-to-end tests: Debian's Chromium driven by playwright-core, headless, in a
 * fresh profile that is deleted afterwards. `.ci/run` installs Chromium when it is missing; a local
 * run without it skips the browser suites (CI=true makes that a failure, like the services).
 */
import { existsSync, mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { type BrowserContext, chromium } from "playwright-core"

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

export const launchBrowser = async (options: { viewport?: { width: number; height: number } } = {}): Promise<Browser> => {
  const profile = mkdtempSync(join(tmpdir(), "dashboard-chromium-"))
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: FLAGS,
    viewport: options.viewport ?? { width: 1280, height: 860 },
    locale: "en-US",
    timezoneId: "UTC",
    colorScheme: "light"
  })
  return {
    context,
    close: async () => {
      await context.close().catch(() => {})
      rmSync(profile, { recursive: true, force: true })
    }
  }
}
