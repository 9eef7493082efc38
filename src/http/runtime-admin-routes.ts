/**
 * Operator views and levers of the runtime (admin token, flat shape):
 * - `GET /admin/v1/queues`: per placement, slots in use, capacity, waiters (by key), circuit state;
 * - `GET /admin/v1/usage?keyId=&from=&to=`: the SQL usage ledger summed by model;
 * - `POST /admin/v1/keys/{id}/credits {amountUsd}`: tops up a prepaid balance, effective at once.
 */
import { Effect, Schema } from "effect"
import { Catalog } from "../catalog/catalog.ts"
import { usageTotalsView } from "../dashboard/usage-report.ts"
import { InvalidRequest } from "../errors.ts"
import { ApiKeys } from "../keys/api-keys.ts"
import { Allowance } from "../metering/allowance.ts"
import { UsageLedger } from "../metering/usage-ledger.ts"
import { formatUsd, MAX_USD_AMOUNT } from "../model/money.ts"
import { CapacityQueues } from "../runtime/capacity-queues.ts"
import { readBody } from "./body.ts"
import { jsonResponse } from "./json.ts"
import type { RouteServices } from "./route-services.ts"
import type { RequestContext, RouteDef } from "./route.ts"

const queues = Effect.fnUntraced(function*() {
  const catalog = yield* Catalog
  const views = yield* (yield* CapacityQueues).view()
  const data = views.map((view) => ({
    placementId: view.placementId,
    modelId: catalog.placements.get(view.placementId)?.modelId ?? null,
    capacity: view.capacity,
    inUse: view.inUse,
    waiting: view.waiting,
    waitingByKey: view.waitingByKey,
    circuit: view.circuit
  }))
  return jsonResponse({ object: "list", data })
})

/** A query-string timestamp: ISO 8601 or Unix seconds, in the years 1 to 9999 (what SQL holds). */
const parseTime = (name: string, value: string | null, fallback: Date) => {
  if (value === null || value === "") return Effect.succeed(fallback)
  const date = /^\d+$/.test(value) ? new Date(Number(value) * 1000) : new Date(value)
  if (Number.isNaN(date.getTime())) {
    return Effect.fail(new InvalidRequest({ message: `${name}: expected an ISO 8601 timestamp or Unix seconds`, param: name }))
  }
  const year = date.getUTCFullYear()
  return year < 1 || year > 9999
    ? Effect.fail(new InvalidRequest({ message: `${name}: must be a time in the years 1 to 9999`, param: name }))
    : Effect.succeed(date)
}

const usage = Effect.fnUntraced(function*(ctx: RequestContext) {
  const now = new Date()
  const monthStart = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1))
  const from = yield* parseTime("from", ctx.query.get("from"), monthStart)
  const to = yield* parseTime("to", ctx.query.get("to"), new Date(now.getTime() + 1000))
  if (from.getTime() >= to.getTime()) return yield* new InvalidRequest({ message: "from: must be before to", param: "from" })
  const keyId = ctx.query.get("keyId") ?? undefined
  if (keyId !== undefined) yield* (yield* ApiKeys).get(keyId) // 404 for an unknown key
  const totals = yield* (yield* UsageLedger).summary({ keyId, from, to })
  const data = totals.map((t) => ({ model: t.model, ...usageTotalsView(t) }))
  const totalMicros = totals.reduce((sum, t) => sum + t.costMicros, 0)
  return jsonResponse({
    object: "usage",
    keyId: keyId ?? null,
    from: from.toISOString(),
    to: to.toISOString(),
    data,
    totalCostUsd: formatUsd(totalMicros)
  })
})

const CreditsBody = Schema.Struct({
  amountUsd: Schema.Finite.check(Schema.isGreaterThan(0), Schema.isLessThanOrEqualTo(MAX_USD_AMOUNT))
})
const readCredits = readBody(CreditsBody)

const addCredits = Effect.fnUntraced(function*(ctx: RequestContext) {
  const body = yield* readCredits(ctx)
  const key = yield* (yield* ApiKeys).get(ctx.params.id)
  const { grantId, balanceMicros } = yield* (yield* Allowance).addCredits(key.id, body.amountUsd)
  return jsonResponse({
    keyId: key.id,
    grantId,
    amountUsd: body.amountUsd,
    balanceUsd: balanceMicros === undefined ? null : formatUsd(balanceMicros)
  }, { status: 201 })
})

/** The credits handler itself, for the dashboard's key page (same validation, same answer). */
export const creditsHandler = addCredits

export const runtimeAdminRoutes: ReadonlyArray<RouteDef<RouteServices>> = [
  { method: "GET", path: "/admin/v1/queues", shape: "flat", auth: "admin", handler: queues },
  { method: "GET", path: "/admin/v1/usage", shape: "flat", auth: "admin", handler: usage },
  { method: "POST", path: "/admin/v1/keys/{id}/credits", shape: "flat", auth: "admin", handler: addCredits }
]
