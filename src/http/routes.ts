/** Every route the gateway serves, surface by surface. */
import { adminRoutes } from "./admin-routes.ts"
import { artifactsRoutes } from "./artifacts-routes.ts"
import { embeddingsRoutes } from "./embeddings-routes.ts"
import { messagesRoutes } from "./messages-routes.ts"
import { modelsRoutes } from "./models-routes.ts"
import { openaiRoutes } from "./openai-routes.ts"
import { placementsRoutes } from "./placements-routes.ts"
import { responsesRoutes } from "./responses-routes.ts"
import type { RouteServices } from "./route-services.ts"
import type { RouteDef } from "./route.ts"
import { runsRoutes } from "./runs-routes.ts"
import { runtimeAdminRoutes } from "./runtime-admin-routes.ts"
import { statesRoutes } from "./states-routes.ts"
import { batchRoutes } from "./unserved-routes.ts"

export type { RouteServices }

export const allRoutes: ReadonlyArray<RouteDef<RouteServices>> = [
  ...modelsRoutes,
  ...messagesRoutes,
  ...openaiRoutes,
  ...responsesRoutes,
  ...embeddingsRoutes,
  ...statesRoutes,
  ...artifactsRoutes,
  ...runsRoutes,
  ...adminRoutes,
  ...placementsRoutes,
  ...runtimeAdminRoutes,
  // Named by the spec, not served here yet: 501 `not_implemented`.
  ...batchRoutes
]
