/**
 * The dashboard in a real browser (Debian's Chromium through playwright-core) against the real
 * gateway process on the embedded engine: sign in, create a key and read its secret once, use the key
 * with the `openai` SDK while the queue page moves by itself, see the usage, follow a run's log
 * live and cancel it, see a key holder's view hold only their own data, refuse a wrong token and a
 * change without the CSRF token, revoke the key and see the SDK get 401; artifacts (list, descriptor,
 * query) and batches of both kinds (list, detail, cancel) as operator and as key holder.
 *
 * One engine: the pages read the admin API, whose every route `dashboard-api.test.ts` checks on
 * both engines; a second Chromium session here repeated the same pages for ~8 s of CPU (half of
 * the file's) without reaching any code the first did not.
 *
 * `UPDATE_SCREENSHOTS=1` writes the screenshots to docs/ (the README shows them); otherwise they
 * go to a temporary directory, so every run still renders every page.
 */
import Anthropic from "@anthropic-ai/sdk"
import OpenAI, { toFile } from "openai"
import { mkdirSync, mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import type { Page } from "playwright-core"
import { afterAll, beforeAll, describe, it } from "vitest"
import { defaultConfig } from "../../src/config/default-config.ts"
import { type Browser, chromiumAvailable, launchBrowser } from "../support/browser.ts"
import { embeddedEngine } from "../support/engines.ts"
import { fastConfigEnv } from "../support/fast-config.ts"
import type { GatewayHandle } from "../support/gateway-process.ts"
import { startInProcessGateway } from "../support/in-process-gateway.ts"

if (!chromiumAvailable && process.env.CI === "true") throw new Error("CI=true and Chromium is missing: .ci/run installs it")

const updateDocs = process.env.UPDATE_SCREENSHOTS === "1"
const DOCS = join(import.meta.dirname, "..", "..", "docs")

describe.skipIf(!chromiumAvailable)("dashboard in Chromium (embedded)", () => {
  let gw: GatewayHandle
  let cleanup: () => Promise<void>
  let operatorBrowser: Browser
  let holderBrowser: Browser
  let page: Page
  let holderPage: Page
  let shots: string
  let created: { id: string; secret: string }
  /** An artifact of the gateway's default key, which the key holder must never see. */
  let otherArtifact: string
  /** A batch of the gateway's default key, which the key holder must never see. */
  let otherBatch: string
  const screenshot = async (target: Page, name: string) => {
    await target.screenshot({ path: join(shots, `dashboard-${name}.png`), fullPage: true })
  }
  const url = (path: string) => `${gw.baseUrl}${path}`

  beforeAll(async () => {
    const setup = await embeddedEngine.setup()
    cleanup = setup.cleanup
    shots = updateDocs ? DOCS : mkdtempSync(join(tmpdir(), "dashboard-shots-"))
    mkdirSync(shots, { recursive: true })
    gw = await startInProcessGateway({
      ...setup.env,
      ...fastConfigEnv(setup.env.GATEWAY_DATA_DIR, (config) => {
        // One slow slot, so the queue page has something to show while calls run.
        const pico = config.models.find((m: { id: string }) => m.id === "svc-pico-1")
        pico.placements = [{ id: "pico-a", backend: "simulator", capacity: 1, simulator: { ttftMs: 2500, tokensPerSecond: 0 } }]
        pico.equivalents = []
        // The built-in free plan (fastConfig lifts it for load tests), as a reader of the screenshots expects.
        config.plans.free = defaultConfig.plans.free
      }),
      // One batch request in flight at a time, so a cancel finds requests still waiting.
      GATEWAY_BATCH_CONCURRENCY: "1"
    })
    operatorBrowser = await launchBrowser()
    await operatorBrowser.context.grantPermissions(["clipboard-read", "clipboard-write"], { origin: gw.baseUrl })
    page = await operatorBrowser.context.newPage()
  })
  afterAll(async () => {
    await operatorBrowser?.close()
    await holderBrowser?.close()
    await gw?.stop()
    await cleanup?.()
    if (!updateDocs && shots) rmSync(shots, { recursive: true, force: true })
  })

  it("refuses a wrong token and stays on the sign-in page", async ({ expect }) => {
    await page.goto(url("/dashboard"))
    await page.getByLabel("Admin token or API key").fill("svc_not-a-real-key")
    await page.getByRole("button", { name: "Sign in" }).click()
    await expect.poll(() => page.getByRole("alert").textContent()).toContain("neither the admin token nor an active API key")
    expect(await operatorBrowser.context.cookies()).toEqual([])
    await page.getByLabel("Admin token or API key").fill("")
    await screenshot(page, "sign-in")
  })

  it("signs in with the admin token (never in the URL) and creates a key whose secret is shown once", async ({ expect }) => {
    await page.getByLabel("Admin token or API key").fill(gw.adminToken)
    await page.getByRole("button", { name: "Sign in" }).click()
    await page.waitForURL(url("/dashboard/keys"))
    expect(page.url()).not.toContain(gw.adminToken)
    const [cookie] = await operatorBrowser.context.cookies()
    expect(cookie).toMatchObject({ name: "svc_dashboard", httpOnly: true, sameSite: "Strict", path: "/dashboard" })
    expect(cookie.value).not.toContain(gw.adminToken)

    await page.locator("input[name=name]").fill("e2e-service")
    await page.locator("select[name=plan]").selectOption("pro")
    await page.getByRole("button", { name: "Create key" }).click()
    const secretField = page.getByTestId("new-key-secret")
    await secretField.waitFor()
    const secret = await secretField.inputValue()
    expect(secret).toMatch(/^svc_[0-9A-Za-z]{40,}$/)
    await page.getByRole("button", { name: "Copy" }).click()
    await expect.poll(() => page.getByRole("button", { name: "Copied ✓" }).count()).toBe(1)
    expect(await page.evaluate(() => navigator.clipboard.readText())).toBe(secret)
    await screenshot(page, "key-secret")
    await page.getByRole("button", { name: "I have stored it" }).click()
    await secretField.waitFor({ state: "detached" })
    // Once closed it is gone: not in the page, not in a reload, not in the API's list.
    expect(await page.content()).not.toContain(secret)
    await page.reload()
    await page.getByText("e2e-service").waitFor()
    expect(await page.content()).not.toContain(secret)
    const row = page.locator("tr", { hasText: "e2e-service" })
    const id = (await row.getAttribute("data-key-id"))!
    expect(await row.textContent()).toContain(`${secret.slice(0, 8)}…${secret.slice(-4)}`)
    expect(await row.textContent()).toContain("$100.00 left of $100.00")
    created = { id, secret }
  })

  it("refuses a change without the CSRF token, even from the signed-in page", async ({ expect }) => {
    const refused = await page.evaluate(async () => {
      const res = await fetch("/dashboard/api/keys", { method: "POST", headers: { "content-type": "application/json" }, body: "{}" })
      return { status: res.status, body: await res.json() }
    })
    expect(refused).toMatchObject({ status: 403, body: { error: { type: "permission_error" } } })
  })

  it("watches the queue page move by itself while the SDK's calls wait, then sees the usage", async ({ expect }) => {
    await page.goto(url("/dashboard/usage"))
    await expect.poll(() => page.getByTestId("usage-total-requests").textContent()).toBe("0")
    await screenshot(page, "usage-empty")

    await page.goto(url("/dashboard/queues"))
    await expect.poll(() => page.getByTestId("queues-live").textContent()).toContain("Live")
    const inUse = page.getByTestId("in-use-pico-a")
    expect(await inUse.textContent()).toBe("0 / 1")
    const sdk = new OpenAI({ apiKey: created.secret, baseURL: `${gw.baseUrl}/v1`, maxRetries: 0 })
    const defaultSdk = new OpenAI({ apiKey: gw.apiKey!, baseURL: `${gw.baseUrl}/v1`, maxRetries: 0 })
    const slow = [1, 2].map((i) => sdk.chat.completions.create({ model: "svc-pico-1", messages: [{ role: "user", content: `say exactly: slow ${i}` }] }))
    await expect.poll(() => inUse.textContent(), { timeout: 10_000 }).toBe("1 / 1")
    await expect.poll(() => page.getByTestId("queues-waiting").textContent(), { timeout: 10_000 }).toBe("1")
    await expect.poll(() => page.locator("tr[data-placement=pico-a]").textContent()).toContain("e2e-service: 1")
    await screenshot(page, "queues")
    const answers = await Promise.all(slow)
    expect(answers.map((a) => a.choices[0].message.content)).toEqual(["slow 1", "slow 2"])
    await expect.poll(() => inUse.textContent(), { timeout: 10_000 }).toBe("0 / 1")
    expect(await page.getByTestId("queues-waiting").textContent()).toBe("0")

    for (const model of ["svc-nova-mini", "svc-nova-mini", "svc-nova-mini", "svc-atlas-1"]) {
      await sdk.chat.completions.create({ model, messages: [{ role: "user", content: "Tell me about the sea" }] })
    }
    await defaultSdk.chat.completions.create({ model: "svc-nova-mini", messages: [{ role: "user", content: "Hello" }] })
    await page.goto(url("/dashboard/usage"))
    await expect.poll(() => page.getByTestId("usage-total-requests").textContent()).toBe("7")
    expect(Number((await page.getByTestId("usage-total-cost").textContent())!.replace("$", ""))).toBeGreaterThan(0)
    const byKey = page.locator(`tr[data-key-id=${created.id}]`)
    expect(await byKey.textContent()).toMatch(/e2e-service.*pro\s*6/)
    expect(await page.locator("canvas").count()).toBe(3)
    await screenshot(page, "usage")
  })

  it("lists runs, follows a run's log live and cancels it from the page", async ({ expect }) => {
    const call = (path: string, body: unknown, key = created.secret) =>
      fetch(url(path), { method: "POST", headers: { authorization: `Bearer ${key}`, "content-type": "application/json" }, body: JSON.stringify(body) })
    const executed = (await (await call("/v1/agent-runs", { model: "svc-nova-mini", input: "Tell me about rivers", metadata: { from: "e2e" } })).json()) as { run: { id: string } }
    const open = (await (await call("/v1/agent-runs", { metadata: { kind: "caller-driven" } })).json()) as { run: { id: string } }
    await call("/v1/agent-runs", {}, gw.apiKey!) // another key's run
    await page.goto(url("/dashboard/runs"))
    await page.locator(`tr[data-run-id=${open.run.id}]`).waitFor()
    expect(await page.locator("tbody tr").count()).toBe(3)
    await expect.poll(async () => {
      await page.getByRole("button", { name: "Refresh" }).click()
      return page.locator(`tr[data-run-id=${executed.run.id}]`).textContent()
    }, { timeout: 30_000, interval: 500 }).toContain("completed")
    await screenshot(page, "runs")
    await page.getByLabel("Status").selectOption("running")
    await expect.poll(() => page.locator("tbody tr").count()).toBe(2)
    await page.getByLabel("Status").selectOption("completed")
    await expect.poll(() => page.locator("tbody tr").count()).toBe(1)
    expect(await page.locator("tbody tr").getAttribute("data-run-id")).toBe(executed.run.id)
    await page.getByLabel("Status").selectOption("")

    await page.goto(url(`/dashboard/runs/${executed.run.id}`))
    await expect.poll(() => page.getByTestId("run-log-state").textContent(), { timeout: 15_000 }).toBe("complete")
    expect(await page.locator(".event-log li").allTextContents()).toEqual([
      expect.stringContaining("node.started"), expect.stringContaining("node.completed"), expect.stringContaining("outcome")
    ])
    await screenshot(page, "run")

    await page.goto(url(`/dashboard/runs/${open.run.id}`))
    await expect.poll(() => page.getByTestId("run-log-state").textContent()).not.toBe("connecting…")
    expect(await page.locator(".event-log li").count()).toBe(0)
    await call(`/v1/agent-runs/${open.run.id}/events`, { events: [{ type: "note", text: "written while the page watched" }] })
    await expect.poll(() => page.locator(".event-log li").count(), { timeout: 10_000 }).toBe(1)
    await page.getByRole("button", { name: "Cancel run" }).click()
    await page.getByRole("dialog").getByRole("button", { name: "Cancel run" }).click()
    await expect.poll(() => page.locator(".run-record").textContent(), { timeout: 10_000 }).toContain("cancelled")
    await expect.poll(() => page.locator(".event-log li").count(), { timeout: 10_000 }).toBe(2)
  })

  it("lists artifacts across keys and shows one's descriptor, versions and a query as a table", async ({ expect }) => {
    await page.goto(url("/dashboard/artifacts"))
    await expect.poll(() => page.locator(".empty").textContent()).toContain("No artifacts yet")
    const upload = async (key: string, body: unknown) => {
      const res = await fetch(url("/v1/artifacts"), { method: "POST", headers: { authorization: `Bearer ${key}`, "content-type": "application/json" }, body: JSON.stringify(body) })
      expect(res.status).toBe(201)
      return ((await res.json()) as { reference: { artifactId: string } }).reference.artifactId
    }
    const rows = [["Oslo", 709000, "NO"], ["Bergen", 291000, "NO"], ["Stockholm", 984000, "SE"], ["Gothenburg", 604000, "SE"], ["Aarhus", 290000, "DK"]]
    const csv = (extra: ReadonlyArray<ReadonlyArray<unknown>>) => ["city,population,country", ...[...rows, ...extra].map((r) => r.join(","))].join("\n")
    const cities = await upload(created.secret, { bytes: csv([]), mimeType: "text/csv", summary: "Nordic cities by population", source: "e2e" })
    await upload(created.secret, { bytes: csv([["Copenhagen", 660000, "DK"]]), mimeType: "text/csv", artifactId: cities, summary: "Nordic cities by population", source: "e2e" })
    const notes = await upload(created.secret, { bytes: "Meeting notes\n\nThe sea is calm today.\nRivers run to it.\n", mimeType: "text/plain" })
    const others = otherArtifact = await upload(gw.apiKey!, { content: [{ sku: "A-1", price: 3 }, { sku: "B-2", price: 5 }] })

    await page.getByRole("button", { name: "Refresh" }).click()
    await page.locator(`tr[data-artifact-id=${others}]`).waitFor()
    expect(await page.locator("tbody tr").count()).toBe(3)
    const citiesRow = await page.locator(`tr[data-artifact-id=${cities}]`).textContent()
    expect(citiesRow).toMatch(/Nordic cities by population.*e2e-service.*table.*csv\s*6.*text\/csv\s*2/)
    await page.getByLabel("Key").selectOption(created.id)
    await expect.poll(() => page.locator("tbody tr").count()).toBe(2)
    expect(await page.locator(`tr[data-artifact-id=${others}]`).count()).toBe(0)
    await page.getByLabel("Key").selectOption("")
    await expect.poll(() => page.locator("tbody tr").count()).toBe(3)
    await screenshot(page, "artifacts")

    await page.locator(`tr[data-artifact-id=${cities}] a`).click()
    await page.waitForURL(url(`/dashboard/artifacts/${cities}`))
    await expect.poll(() => page.locator(".artifact-record").textContent()).toContain("6 rows × 3 columns")
    expect(await page.locator(".artifact-record").textContent()).toContain("e2e-service")
    expect(await page.locator("tr[data-version]").count()).toBe(2)
    await page.getByRole("button", { name: "Add filter" }).click()
    await page.getByLabel("Filter field").selectOption("country")
    await page.getByLabel("Filter operator").selectOption("ne")
    await page.getByLabel("Filter value").fill("SE")
    await page.locator("select[name=sort]").selectOption("population")
    await page.locator("select[name=dir]").selectOption("desc")
    await page.locator("input[name=limit]").fill("3")
    await page.getByRole("button", { name: "Run query" }).click()
    await expect.poll(() => page.getByTestId("query-summary").textContent()).toContain("3 of 4 matching rows")
    expect(await page.locator(".query-result tbody tr td:first-child").allTextContents()).toEqual(["Oslo", "Copenhagen", "Bergen"])
    await screenshot(page, "artifact")
    // an earlier version, and a query the service refuses, said in the page
    await page.locator("tr[data-version='1']").getByRole("button", { name: "Show" }).click()
    await expect.poll(() => page.locator(".artifact-record").textContent()).toContain("5 rows × 3 columns")
    await page.locator("input[name=limit]").fill("5000")
    await page.getByRole("button", { name: "Run query" }).click()
    await expect.poll(() => page.locator(".artifact-query [role=alert]").textContent()).toContain("limit: at most 1000")

    await page.goto(url(`/dashboard/artifacts/${notes}`))
    await page.getByRole("button", { name: "Run query" }).click()
    await expect.poll(() => page.locator(".artifact-text").textContent()).toContain("The sea is calm today.")
    await page.goto(url("/dashboard/artifacts/art_doesnotexist"))
    await expect.poll(() => page.getByRole("alert").textContent()).toContain("No artifact with id art_doesnotexist")
  })

  it("lists both kinds of batches with their counts, and cancels one with confirmation", async ({ expect }) => {
    // Batches of the default key: the e2e key's usage stays what the key-holder test expects.
    const openai = new OpenAI({ apiKey: gw.apiKey!, baseURL: `${gw.baseUrl}/v1`, maxRetries: 0 })
    const input = await openai.files.create({
      file: await toFile(Buffer.from(["a", "b", "c"].map((id) => JSON.stringify({ custom_id: id, method: "POST", url: "/v1/chat/completions", body: { model: "svc-nova-mini", messages: [{ role: "user", content: `say exactly: ${id}` }] } })).join("\n")), "nightly.jsonl"),
      purpose: "batch"
    })
    const quick = await openai.batches.create({ input_file_id: input.id, endpoint: "/v1/chat/completions", completion_window: "24h", metadata: { job: "nightly" } })
    // pico has one slow slot (2.5 s per answer): this batch is still running when it is cancelled,
    // with most of its requests not started (12 take 30 s; the cancel comes well before, even on
    // a loaded machine — with 5, a slow page let 3 finish first).
    const slow = await new Anthropic({ apiKey: gw.apiKey!, baseURL: gw.baseUrl, maxRetries: 0 }).messages.batches.create({
      requests: Array.from({ length: 12 }, (_, i) => ({ custom_id: `slow-${i}`, params: { model: "svc-pico-1", max_tokens: 16, messages: [{ role: "user" as const, content: `say exactly: ${i}` }] } }))
    })
    otherBatch = slow.id
    await page.goto(url("/dashboard/batches"))
    await page.locator(`tr[data-batch-id=${slow.id}]`).waitFor()
    expect(await page.locator("tbody tr").count()).toBe(2)
    expect(await page.locator(`tr[data-batch-id=${slow.id}]`).textContent()).toMatch(/Messages.*default.*in progress/)
    await expect.poll(async () => {
      await page.getByRole("button", { name: "Refresh" }).click()
      return page.locator(`tr[data-batch-id=${quick.id}]`).textContent()
    }, { timeout: 30_000, interval: 500 }).toMatch(/OpenAI.*completed\s*3 \/ 3/)
    await page.getByLabel("Kind").selectOption("openai")
    await expect.poll(() => page.locator("tbody tr").count()).toBe(1)
    await page.getByLabel("Kind").selectOption("")
    await expect.poll(() => page.locator("tbody tr").count()).toBe(2)
    await screenshot(page, "batches")

    await page.locator(`tr[data-batch-id=${slow.id}] a`).click()
    await page.waitForURL(url(`/dashboard/batches/${slow.id}`))
    await expect.poll(() => page.getByTestId("batch-total").textContent()).toBe("12")
    await page.getByRole("button", { name: "Cancel batch" }).click()
    const dialog = page.getByRole("dialog")
    expect(await dialog.textContent()).toContain("cannot be undone")
    await dialog.getByRole("button", { name: "Cancel batch" }).click()
    await expect.poll(() => page.getByTestId("batch-status").textContent(), { timeout: 10_000 }).toMatch(/canceling|ended/)
    await expect.poll(async () => Number(await page.getByTestId("batch-canceled").textContent())).toBeGreaterThanOrEqual(3)
    expect(await page.getByRole("button", { name: "Cancel batch" }).count()).toBe(0)
    await screenshot(page, "batch")
    const viaApi = await new Anthropic({ apiKey: gw.apiKey!, baseURL: gw.baseUrl, maxRetries: 0 }).messages.batches.retrieve(slow.id)
    expect(viaApi.cancel_initiated_at).not.toBeNull()

    await page.goto(url(`/dashboard/batches/${quick.id}`))
    await expect.poll(() => page.locator(".batch-record").textContent()).toContain("Output file")
  })

  it("shows the catalog with its prices", async ({ expect }) => {
    await page.goto(url("/dashboard/models"))
    const atlas = page.locator("tr[data-model=svc-atlas-1]")
    await atlas.waitFor()
    expect(await atlas.textContent()).toMatch(/\$3.*\$0\.3.*\$15/)
    await screenshot(page, "models")
  })

  it("gives a key holder their own key, usage and runs, and nothing of other keys", async ({ expect }) => {
    holderBrowser = await launchBrowser()
    const holder = holderPage = await holderBrowser.context.newPage()
    await holder.goto(url("/dashboard"))
    await holder.getByLabel("Admin token or API key").fill(created.secret)
    await holder.getByRole("button", { name: "Sign in" }).click()
    await holder.waitForURL(url("/dashboard/my-key"))
    const nav = await holder.locator("nav").textContent()
    expect(nav).toContain("Usage")
    expect(nav).not.toContain("Keys")
    expect(nav).not.toContain("Queues")
    await expect.poll(() => holder.getByTestId("rpm-remaining").textContent()).toMatch(/of 600 left/)
    expect(await holder.getByTestId("allowance-remaining").textContent()).toMatch(/left of \$100\.00/)
    await screenshot(holder, "my-key")
    await holder.goto(url("/dashboard/usage"))
    await expect.poll(() => holder.getByTestId("usage-total-requests").textContent()).toMatch(/^(7|8)$/) // 6 calls + the run's step(s)
    expect(await holder.locator("tbody tr[data-key-id]").count()).toBe(1)
    await holder.goto(url("/dashboard/runs"))
    await holder.locator("tbody tr").first().waitFor()
    expect(await holder.locator("tbody tr").count()).toBe(2) // not the default key's run
    await holder.goto(url("/dashboard/artifacts"))
    await holder.locator("tbody tr").first().waitFor()
    expect(await holder.locator("tbody tr").count()).toBe(2) // not the default key's artifact
    expect(await holder.locator("thead").textContent()).not.toContain("Key")
    const probes = await holder.evaluate(async ([otherKey, artifact]) => {
      const status = async (path: string) => (await fetch(path)).status
      return {
        keys: await status("/dashboard/api/keys"),
        queues: await status("/dashboard/api/queues"),
        otherUsage: await status(`/dashboard/api/usage?keyId=${otherKey}`),
        otherArtifact: await status(`/dashboard/api/artifacts/${artifact}`)
      }
    }, [(((await (await gw.admin("GET", "/admin/v1/keys")).json()) as { data: Array<{ id: string; name: string }> }).data.find((k) => k.name === "default"))!.id, otherArtifact])
    expect(probes).toEqual({ keys: 403, queues: 403, otherUsage: 404, otherArtifact: 404 })
    await holder.goto(url("/dashboard/batches"))
    await expect.poll(() => holder.locator(".empty").textContent()).toContain("No batches yet") // the default key's are not theirs
    expect(await holder.evaluate(async (id) => (await fetch(`/dashboard/api/batches/${id}`)).status, otherBatch)).toBe(404)
    await holder.goto(url(`/dashboard/artifacts/${otherArtifact}`))
    await expect.poll(() => holder.getByRole("alert").textContent()).toContain(`No artifact with id ${otherArtifact}`)
  })

  it("revokes the key with confirmation: the SDK gets 401 and the key holder is signed out", async ({ expect }) => {
    await page.goto(url("/dashboard/keys"))
    const row = page.locator(`tr[data-key-id=${created.id}]`)
    await row.getByRole("button", { name: "Revoke" }).click()
    const dialog = page.getByRole("dialog")
    expect(await dialog.textContent()).toContain("cannot be undone")
    await dialog.getByRole("button", { name: "Revoke key" }).click()
    await expect.poll(() => row.textContent()).toContain("revoked")
    const sdk = new OpenAI({ apiKey: created.secret, baseURL: `${gw.baseUrl}/v1`, maxRetries: 0 })
    await expect(sdk.chat.completions.create({ model: "svc-nova-mini", messages: [{ role: "user", content: "hi" }] }))
      .rejects.toMatchObject({ status: 401 })
    await screenshot(page, "keys")

    const holder = holderPage
    await holder.reload()
    await holder.getByLabel("Admin token or API key").waitFor()
    await expect.poll(() => holder.getByRole("status").textContent()).toContain("revoked")
  })

  it("fits a phone's width and signs out", async ({ expect }) => {
    await page.setViewportSize({ width: 390, height: 844 })
    // Polled until the page is no wider than the viewport: measured the moment its content
    // appeared, the artifact page was once 4 px wider in a full run on the loaded 2-core machine
    // (its layout still settling). A page that really overflows still fails, after the poll's 10 s.
    const fitsWidth = async (what: string) => {
      try {
        await expect.poll(() => page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth), { message: `${what} overflows` })
          .toBeLessThanOrEqual(0)
      } catch (error) {
        // Which elements stick out past the viewport outside any box that scrolls (a full run once
        // failed here by 5 px, never reproduced alone): the next failure says where.
        const culprits = await page.evaluate(() => {
          const width = document.documentElement.clientWidth
          const scrolls = (element: Element | null): boolean =>
            element !== null && element !== document.documentElement &&
            (["auto", "scroll", "hidden"].includes(getComputedStyle(element).overflowX) || scrolls(element.parentElement))
          return [...document.querySelectorAll("body *")]
            .filter((element) => element.getBoundingClientRect().right > width + 0.5 && !scrolls(element.parentElement))
            .slice(0, 6)
            .map((element) => `<${element.tagName.toLowerCase()} class="${element.className}"> right ${element.getBoundingClientRect().right.toFixed(1)}: ${(element.textContent ?? "").slice(0, 60)}`)
        })
        throw new Error(`${what} is wider than the viewport; sticking out: ${culprits.join(" | ") || "nothing found"}`, { cause: error })
      }
    }
    await page.goto(url("/dashboard/usage"))
    await page.getByTestId("usage-total-requests").waitFor()
    await fitsWidth("usage") // wide tables scroll inside their own box
    await screenshot(page, "usage-phone")
    await page.goto(url("/dashboard/artifacts"))
    await page.locator("tbody tr").first().waitFor()
    await fitsWidth("artifacts")
    await page.locator("tbody tr a").first().click()
    await page.getByRole("button", { name: "Run query" }).click()
    await page.getByTestId("query-summary").waitFor()
    await fitsWidth("an artifact's query")
    await screenshot(page, "artifact-phone")
    await page.goto(url("/dashboard/batches"))
    await page.locator("tbody tr").first().waitFor()
    await fitsWidth("batches")
    await page.setViewportSize({ width: 1280, height: 860 })
    await page.getByRole("button", { name: "Sign out" }).click()
    await page.getByLabel("Admin token or API key").waitFor()
    const after = await page.evaluate(async () => (await fetch("/dashboard/api/session")).status)
    expect(after).toBe(401)
  })
}, 60_000)
