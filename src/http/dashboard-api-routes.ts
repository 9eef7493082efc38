/**
 * The dashboard's data endpoints (`/dashboard/api/*`, session cookie, flat error shape). They
 * reuse the services behind the admin API and answer only what the session may see:
 * - operators (admin token): keys (the admin API's own handlers), usage of every key, models;
 * - key holders (`svc_` key): their key's allowance and rate-limit windows, its usage, models.
 * Queues and runs (live feeds) are in `dashboard-live-routes.ts`.
 */
import { Clock, Effect } from "effect"
import { Catalog } from "../catalog/catalog.ts"
import { toCatalogEntry } from "../catalog/entries.ts"
import { ConfigFile } from "../config/config-file.ts"
import { type Access, requireSession } from "../dashboard/guard.ts"
import { KeyStatus } from "../dashboard/key-status.ts"
import type { DashboardSession, KeyHolderSession } from "../dashboard/sessions.ts"
import { UsageReport, usageTotalsView } from "../dashboard/usage-report.ts"
import type { UsageTotals } from "../metering/usage-ledger.ts"
import { InvalidRequest, NotFound } from "../errors.ts"
import { ApiKeys } from "../keys/api-keys.ts"
import type { KeyRecord } from "../keys/keys-repo.ts"
import { allowsModel } from "../keys/permissions.ts"
import { Surfaces } from "../keys/surfaces.ts"
import { monthOf } from "../metering/month.ts"
import { keyHandlers, keyView } from "./admin-routes.ts"
import { jsonResponse } from "./json.ts"
import type { RouteServices } from "./route-services.ts"
import type { RequestContext, RouteDef } from "./route.ts"
import { creditsHandler } from "./runtime-admin-routes.ts"

export type DashboardHandler = (ctx: RequestContext, session: DashboardSession) => ReturnType<RouteDef<RouteServices>["handler"]>

/** A dashboard endpoint: the session (and CSRF token, for changes) is checked before the handler runs. */
export const dashboardApi = (
  method: RouteDef<RouteServices>["method"],
  path: string,
  access: Access,
  handler: DashboardHandler
): RouteDef<RouteServices> => ({
  method,
  path: `/dashboard/api${path}`,
  shape: "flat",
  auth: "none",
  handler: (ctx) => Effect.flatMap(requireSession(ctx, access), (session) => handler(ctx, session))
})

const NO_STORE = { "cache-control": "no-store" }

// ---- keys (operator) ----

const listKeys = Effect.fnUntraced(function*() {
  const keys = yield* (yield* ApiKeys).list()
  const status = yield* KeyStatus
  const config = yield* ConfigFile
  const data = yield* Effect.forEach(keys, (key) =>
    Effect.map(
      key.revokedAt === null ? status.allowance(key) : Effect.succeed(undefined),
      (allowance) => ({ ...keyView(key), allowance: allowance ?? null })
    ), { concurrency: 8 })
  const plans = Object.entries(config.plans).map(([name, plan]) => ({ name, ...plan, prepaid: plan.prepaid === true }))
  return jsonResponse({ object: "list", data, plans, defaultPlan: config.defaultPlan, surfaces: Surfaces }, { headers: NO_STORE })
})

// ---- usage (both; a key holder sees only their key) ----

const MONTH_PATTERN = /^(\d{4})-(0[1-9]|1[0-2])$/

const monthFromQuery = (ctx: RequestContext, now: number) => {
  const raw = ctx.query.get("month")
  if (raw === null || raw === "") return Effect.succeed(monthOf(now))
  const m = MONTH_PATTERN.exec(raw)
  return m === null
    ? Effect.fail(new InvalidRequest({ message: "month: expected YYYY-MM, e.g. 2026-01", param: "month" }))
    : Effect.succeed(monthOf(Date.UTC(Number(m[1]), Number(m[2]) - 1, 1)))
}

const addTotals = (a: UsageTotals, b: UsageTotals): UsageTotals => ({
  requests: a.requests + b.requests,
  inputTokens: a.inputTokens + b.inputTokens,
  outputTokens: a.outputTokens + b.outputTokens,
  cachedInputTokens: a.cachedInputTokens + b.cachedInputTokens,
  reasoningTokens: a.reasoningTokens + b.reasoningTokens,
  costMicros: a.costMicros + b.costMicros
})
const ZERO: UsageTotals = { requests: 0, inputTokens: 0, outputTokens: 0, cachedInputTokens: 0, reasoningTokens: 0, costMicros: 0 }

/** The key a usage query is about: a key holder's own (asking for another is 404, as everywhere). */
const usageKey = Effect.fnUntraced(function*(ctx: RequestContext, session: DashboardSession) {
  const asked = ctx.query.get("keyId") ?? undefined
  if (session.role === "key") {
    if (asked !== undefined && asked !== session.key.id) return yield* new NotFound({ kind: "resource", message: `No key with id ${asked}` })
    return session.key
  }
  return asked === undefined || asked === "" ? undefined : yield* (yield* ApiKeys).get(asked)
})

const usage = Effect.fnUntraced(function*(ctx: RequestContext, session: DashboardSession) {
  const now = yield* Clock.currentTimeMillis
  const month = yield* monthFromQuery(ctx, now)
  const key = yield* usageKey(ctx, session)
  const query = { from: new Date(month.start), to: new Date(month.end), keyId: key?.id }
  const report = yield* UsageReport
  const daily = yield* report.daily(query)
  const perKey = yield* report.byKey(query)

  const byModel = new Map<string, UsageTotals>()
  for (const row of daily) byModel.set(row.model, addTotals(byModel.get(row.model) ?? ZERO, row))
  const total = [...byModel.values()].reduce(addTotals, ZERO)

  // Allowance is a figure of the current month: past months show spend only.
  const current = month.label === monthOf(now).label
  const status = yield* KeyStatus
  const keysById = new Map<string, KeyRecord>(
    session.role === "key" ? [[session.key.id, session.key]] : (yield* (yield* ApiKeys).list()).map((k) => [k.id, k])
  )
  // (a key holder's `key` is always their own: usageKey)
  const shownKeys = key !== undefined
    ? [key]
    : session.role === "key"
    ? [session.key]
    : [...keysById.values()].filter((k) => k.revokedAt === null || perKey.some((u) => u.keyId === k.id))
  const keyRows = yield* Effect.forEach(shownKeys, (k) =>
    Effect.map(
      current && k.revokedAt === null ? status.allowance(k) : Effect.succeed(undefined),
      (allowance) => ({
        keyId: k.id,
        name: k.name,
        hint: k.hint,
        plan: k.plan,
        revoked: k.revokedAt !== null,
        ...usageTotalsView(perKey.find((u) => u.keyId === k.id) ?? ZERO),
        allowance: allowance ?? null
      })
    ), { concurrency: 8 })
  keyRows.sort((a, b) => Number(b.costUsd) - Number(a.costUsd) || a.keyId.localeCompare(b.keyId))

  const days: Array<string> = []
  for (let t = month.start; t < month.end; t += 86_400_000) days.push(new Date(t).toISOString().slice(0, 10))
  return jsonResponse({
    object: "dashboard_usage",
    month: month.label,
    from: query.from.toISOString(),
    to: query.to.toISOString(),
    keyId: key?.id ?? null,
    days,
    daily: daily.map((row) => ({ day: row.day, model: row.model, ...usageTotalsView(row) })),
    byModel: [...byModel.entries()].map(([model, t]) => ({ model, ...usageTotalsView(t) })).sort((a, b) => Number(b.costUsd) - Number(a.costUsd)),
    byKey: keyRows,
    totals: usageTotalsView(total)
  }, { headers: NO_STORE })
})

// ---- the signed-in key (key holders) ----

const myKey = Effect.fnUntraced(function*(_ctx: RequestContext, session: KeyHolderSession) {
  const key = session.key
  const status = yield* KeyStatus
  const plan = status.plan(key)
  const [allowance, rateLimits] = yield* Effect.all([status.allowance(key), status.rateLimits(key)], { concurrency: 2 })
  return jsonResponse({
    object: "dashboard_key",
    key: keyView(key),
    plan: plan === undefined ? null : { name: key.plan, ...plan, prepaid: plan.prepaid === true },
    allowance: allowance ?? null,
    rateLimits: rateLimits ?? null
  }, { headers: NO_STORE })
})

/** Only key-holder sessions have a key of their own; an operator asking gets a clear 404. */
const keyHolderOnly = (handler: (ctx: RequestContext, session: KeyHolderSession) => ReturnType<DashboardHandler>): DashboardHandler => (ctx, session) =>
  session.role === "key"
    ? handler(ctx, session)
    : Effect.fail(new NotFound({ kind: "resource", message: "Operators are not signed in with a key; see the Keys page" }))

// ---- models (both) ----

const models = Effect.fnUntraced(function*(_ctx: RequestContext, session: DashboardSession) {
  const catalog = yield* Catalog
  const data = catalog.listed.map((entry) => ({
    ...toCatalogEntry(entry),
    kind: entry.kind,
    allowed: session.key === undefined || allowsModel(session.key.permissions, entry.model.id)
  }))
  return jsonResponse({ object: "list", data }, { headers: NO_STORE })
})

export const dashboardApiRoutes: ReadonlyArray<RouteDef<RouteServices>> = [
  dashboardApi("GET", "/keys", "operator", listKeys),
  dashboardApi("POST", "/keys", "operator", (ctx) => keyHandlers.create(ctx)),
  dashboardApi("PATCH", "/keys/{id}", "operator", (ctx) => keyHandlers.update(ctx)),
  dashboardApi("DELETE", "/keys/{id}", "operator", (ctx) => keyHandlers.revoke(ctx)),
  dashboardApi("POST", "/keys/{id}/credits", "operator", (ctx) => creditsHandler(ctx)),
  dashboardApi("GET", "/usage", "signed-in", usage),
  dashboardApi("GET", "/my-key", "signed-in", keyHolderOnly(myKey)),
  dashboardApi("GET", "/models", "signed-in", models)
]
