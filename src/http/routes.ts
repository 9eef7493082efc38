/** Every route the gateway serves, surface by surface. */
import type { Catalog } from "../catalog/catalog.ts"
import type { ApiKeys } from "../keys/api-keys.ts"
import type { StatesRepo } from "../states/states-repo.ts"
import { adminRoutes } from "./admin-routes.ts"
import { modelsRoutes } from "./models-routes.ts"
import type { RouteDef } from "./route.ts"
import { statesRoutes } from "./states-routes.ts"

/** The services route handlers may use. */
export type RouteServices = Catalog | ApiKeys | StatesRepo

export const allRoutes: ReadonlyArray<RouteDef<RouteServices>> = [...modelsRoutes, ...adminRoutes, ...statesRoutes]
