/**
 * Probes for load balancers and orchestrators: no credentials, never metered, never cached.
 * - `GET /healthz`: the process is up and its event loop answers → 200 `{status:"ok"}`;
 * - `GET /readyz`: the database (and Redis, when configured) answer → 200 `{status:"ready", checks}`,
 *   else 503 `{status:"not_ready", error:{type:"api_error", message}, checks}`, the message naming
 *   what is unreachable.
 */
import { Effect } from "effect"
import { Readiness } from "../health/readiness.ts"
import { jsonResponse } from "./json.ts"
import type { RouteDef } from "./route.ts"

const NO_STORE = { "cache-control": "no-store" }

const healthz = () => Effect.succeed(jsonResponse({ status: "ok" }, { headers: NO_STORE }))

const readyz = Effect.fnUntraced(function*() {
  const report = yield* (yield* Readiness).check()
  if (report.ready) return jsonResponse({ status: "ready", checks: report.checks }, { headers: NO_STORE })
  const down = Object.entries(report.checks).flatMap(([name, check]) => (check.status === "ok" ? [] : [name]))
  return jsonResponse({
    status: "not_ready",
    error: { type: "api_error", message: `Not ready: ${down.join(" and ")} ${down.length === 1 ? "is" : "are"} unreachable` },
    checks: report.checks
  }, { status: 503, headers: { ...NO_STORE, "retry-after": "1" } })
})

export const healthRoutes: ReadonlyArray<RouteDef<Readiness>> = [
  { method: "GET", path: "/healthz", shape: "flat", auth: "none", handler: healthz },
  { method: "GET", path: "/readyz", shape: "flat", auth: "none", handler: readyz }
]
