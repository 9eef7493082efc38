/**
 * Everything agent runs need, as one layer: the signal bus, the log, the repositories and the
 * actor host. Requires SqlClient, Settings, Catalog and ModelCaller.
 */
import { Layer } from "effect"
import { RunSignals } from "../coordination/run-signals.ts"
import { KeysRepo } from "../keys/keys-repo.ts"
import { RunBudget } from "./run-budget.ts"
import { RunExecutor } from "./run-executor.ts"
import { RunLeases } from "./run-leases.ts"
import { RunLog } from "./run-log.ts"
import { RunsRepo } from "./runs-repo.ts"

export const RunsLive = RunExecutor.layer.pipe(
  Layer.provideMerge(Layer.mergeAll(RunsRepo.layer, RunBudget.layer, RunLeases.layer, KeysRepo.layer)),
  Layer.provideMerge(RunLog.layer),
  Layer.provideMerge(RunSignals.layer)
)
