/** Every route the gateway serves, surface by surface. */
import { adminRoutes } from "./admin-routes.ts"
import { artifactsRoutes } from "./artifacts-routes.ts"
import { batchesRoutes } from "./batches-routes.ts"
import { dashboardApiRoutes } from "./dashboard-api-routes.ts"
import { dashboardArtifactsRoutes } from "./dashboard-artifacts-routes.ts"
import { dashboardBatchesRoutes } from "./dashboard-batches-routes.ts"
import { dashboardLiveRoutes } from "./dashboard-live-routes.ts"
import { type DashboardExtensions, dashboardRoutes } from "./dashboard-routes.ts"
import { embeddingsRoutes } from "./embeddings-routes.ts"
import { filesRoutes } from "./files-routes.ts"
import { healthRoutes } from "./health-routes.ts"
import { messageBatchesRoutes } from "./message-batches-routes.ts"
import { messagesRoutes } from "./messages-routes.ts"
import { metricsRoutes } from "./metrics-routes.ts"
import { modelsRoutes } from "./models-routes.ts"
import { openaiRoutes } from "./openai-routes.ts"
import { placementsRoutes } from "./placements-routes.ts"
import { responsesRoutes } from "./responses-routes.ts"
import type { RouteServices } from "./route-services.ts"
import type { RouteDef } from "./route.ts"
import { runsRoutes } from "./runs-routes.ts"
import { runtimeAdminRoutes } from "./runtime-admin-routes.ts"
import { statesRoutes } from "./states-routes.ts"

export type { RouteServices }

const apiRoutes: ReadonlyArray<RouteDef<RouteServices>> = [
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
  ...messageBatchesRoutes,
  ...batchesRoutes,
  ...filesRoutes
]

/** Surfaces served by this build that have (or will have) a dashboard page of their own. */
const served = apiRoutes
const extensions: DashboardExtensions = {
  artifacts: served.some((route) => route.path.startsWith("/v1/artifacts")),
  batches: served.some((route) => route.path.includes("/batches"))
}

export const allRoutes: ReadonlyArray<RouteDef<RouteServices>> = [
  ...apiRoutes,
  ...healthRoutes,
  ...metricsRoutes,
  ...dashboardApiRoutes,
  ...dashboardLiveRoutes,
  ...dashboardArtifactsRoutes,
  ...dashboardBatchesRoutes,
  ...dashboardRoutes(extensions)
]
