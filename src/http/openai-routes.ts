/** Routes of this surface (filled in by the dialect work). */
import type { RouteServices } from "./route-services.ts"
import type { RouteDef } from "./route.ts"

export const openaiRoutes: ReadonlyArray<RouteDef<RouteServices>> = []
