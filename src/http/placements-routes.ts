/**
 * Fault injection for tests and demos (admin, flat shape), simulator placements only:
 * `POST /admin/v1/placements/{id}/faults {mode, status?, rate?}` changes how the placement's
 * simulator answers from the next call on; `mode: "none"` clears it.
 */
import { Effect, Schema } from "effect"
import { Catalog } from "../catalog/catalog.ts"
import { InvalidRequest, NotFound } from "../errors.ts"
import { Placements } from "../runtime/placements.ts"
import { readBody } from "./body.ts"
import { jsonResponse } from "./json.ts"
import type { RouteServices } from "./route-services.ts"
import type { RequestContext, RouteDef } from "./route.ts"

const FaultsBody = Schema.Struct({
  mode: Schema.Literals(["none", "error", "hang", "slow", "break-mid-stream"]),
  status: Schema.optional(Schema.Int.check(Schema.isBetween({ minimum: 400, maximum: 599 }))),
  rate: Schema.optional(Schema.Finite.check(Schema.isBetween({ minimum: 0, maximum: 1 })))
})
const readFaults = readBody(FaultsBody)

const setFaults = Effect.fnUntraced(function*(ctx: RequestContext) {
  const body = yield* readFaults(ctx)
  const catalog = yield* Catalog
  const entry = catalog.placements.get(ctx.params.id)
  const runtime = (yield* Placements).byId.get(ctx.params.id)?.runtime
  if (entry === undefined || runtime === undefined) {
    return yield* new NotFound({ kind: "resource", message: `No placement with id ${ctx.params.id}` })
  }
  if (entry.placement.backend !== "simulator") {
    return yield* new InvalidRequest({ message: `Faults can only be injected into simulator placements; ${ctx.params.id} is ${entry.placement.backend}` })
  }
  runtime.faults = {
    mode: body.mode,
    ...(body.status === undefined ? {} : { status: body.status }),
    ...(body.rate === undefined ? {} : { rate: body.rate })
  }
  return jsonResponse({ placementId: runtime.id, modelId: runtime.modelId, faults: runtime.faults })
})

export const placementsRoutes: ReadonlyArray<RouteDef<RouteServices>> = [
  { method: "POST", path: "/admin/v1/placements/{id}/faults", shape: "flat", auth: "admin", handler: setFaults }
]
