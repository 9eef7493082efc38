/** The services route handlers may use; every routes file declares its routes over this union. */
import type { Artifacts } from "../artifacts/artifacts.ts"
import type { Catalog } from "../catalog/catalog.ts"
import type { ApiKeys } from "../keys/api-keys.ts"
import type { ResponsesRepo } from "../stored-responses/responses-repo.ts"
import type { CapacityQueues } from "../runtime/capacity-queues.ts"
import type { ModelCaller } from "../runtime/model-caller.ts"
import type { Placements } from "../runtime/placements.ts"
import type { Settings } from "../config/settings.ts"
import type { Allowance } from "../metering/allowance.ts"
import type { UsageLedger } from "../metering/usage-ledger.ts"
import type { RunSignals } from "../coordination/run-signals.ts"
import type { RunExecutor } from "../runs/run-executor.ts"
import type { RunLog } from "../runs/run-log.ts"
import type { RunsRepo } from "../runs/runs-repo.ts"
import type { StatesRepo } from "../states/states-repo.ts"
import type { ConfigFile } from "../config/config-file.ts"
import type { ArtifactList } from "../dashboard/artifact-list.ts"
import type { BatchList } from "../dashboard/batch-list.ts"
import type { DashboardAssets } from "../dashboard/assets.ts"
import type { KeyStatus } from "../dashboard/key-status.ts"
import type { OperatorRuns } from "../dashboard/operator-runs.ts"
import type { DashboardSessions } from "../dashboard/sessions.ts"
import type { UsageReport } from "../dashboard/usage-report.ts"
import type { Readiness } from "../health/readiness.ts"
import type { BatchesRepo } from "../batches/batches-repo.ts"
import type { BatchWorkers } from "../batches/batch-workers.ts"
import type { FilesRepo } from "../files/files-repo.ts"
import type { MetricsScrape } from "../observability/metrics-scrape.ts"

export type RouteServices =
  | Catalog
  | ApiKeys
  | StatesRepo
  | Artifacts
  | ModelCaller
  | ResponsesRepo
  | Placements
  | CapacityQueues
  | Settings
  | Allowance
  | UsageLedger
  | RunsRepo
  | RunLog
  | RunExecutor
  | RunSignals
  | ConfigFile
  | Readiness
  | DashboardSessions
  | DashboardAssets
  | UsageReport
  | KeyStatus
  | OperatorRuns
  | BatchList
  | BatchesRepo
  | BatchWorkers
  | FilesRepo
  | ArtifactList
  | MetricsScrape
