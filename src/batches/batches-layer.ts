/**
 * Everything batches and files need, as one layer: the repositories and this instance's workers.
 * Requires SqlClient, Settings, Catalog and ModelCaller.
 */
import { Layer } from "effect"
import { KeysRepo } from "../keys/keys-repo.ts"
import { FilesRepo } from "../files/files-repo.ts"
import { BatchWorkers } from "./batch-workers.ts"
import { BatchesRepo } from "./batches-repo.ts"

export const BatchesLive = BatchWorkers.layer.pipe(
  Layer.provideMerge(Layer.mergeAll(BatchesRepo.layer, FilesRepo.layer, KeysRepo.layer))
)
