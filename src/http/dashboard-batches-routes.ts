/**
 * The dashboard's batch views (`/dashboard/api/batches*`, session cookie, flat error shape), over
 * both kinds: Messages batches (`/v1/messages/batches`) and OpenAI batches (`/v1/batches`).
 * - key holders see their key's batches, scoped as the batch APIs are (the key's `batches`
 *   surface is required, another key's id is 404 everywhere, never listed);
 * - operators see every key's.
 * A batch's detail and its cancel go through `BatchesRepo` with the owning key and kind, the very
 * calls `GET …/{id}` and `POST …/{id}/cancel` make.
 */
import { Effect } from "effect"
import type { BatchKind } from "../../machines/batch.ts"
import type { BatchRecord } from "../batches/batches-repo.ts"
import { BatchesRepo } from "../batches/batches-repo.ts"
import { batchItem, BatchList } from "../dashboard/batch-list.ts"
import type { DashboardSession } from "../dashboard/sessions.ts"
import { InvalidRequest, NotFound, PermissionDenied } from "../errors.ts"
import { allowsSurface } from "../keys/permissions.ts"
import { dashboardApi } from "./dashboard-api-routes.ts"
import { keyLabel, listedKeyId, listPage } from "./dashboard-list-query.ts"
import { jsonResponse } from "./json.ts"
import type { RouteServices } from "./route-services.ts"
import type { RequestContext, RouteDef } from "./route.ts"

const NO_STORE = { "cache-control": "no-store" }
const KINDS: ReadonlyArray<BatchKind> = ["messages", "openai"]

/** A key holder needs the key's `batches` surface, as on the API (403 naming it otherwise). */
const requireSurface = (session: DashboardSession) =>
  session.role === "key" && !allowsSurface(session.key.permissions, "batches")
    ? Effect.fail(new PermissionDenied({ message: "This key is not allowed to use the batches surface" }))
    : Effect.void

const notFound = (id: string) => new NotFound({ kind: "resource", message: `No batch with id ${id}` })

/** The batch's key and kind, when this session may see it; 404 otherwise (as on the batch APIs). */
const ownerOf = Effect.fnUntraced(function*(session: DashboardSession, batchId: string) {
  const owner = yield* (yield* BatchList).owner(batchId)
  if (session.role === "key" && owner.keyId !== session.key.id) return yield* notFound(batchId)
  return owner
})

const listQuery = Effect.fnUntraced(function*(ctx: RequestContext) {
  const page = yield* listPage(ctx)
  const kind = ctx.query.get("kind") || undefined
  if (kind !== undefined && !KINDS.includes(kind as BatchKind)) {
    return yield* new InvalidRequest({ message: "kind: expected messages or openai", param: "kind" })
  }
  return { ...page, kind: kind as BatchKind | undefined }
})

const listBatches = Effect.fnUntraced(function*(ctx: RequestContext, session: DashboardSession) {
  yield* requireSurface(session)
  const query = yield* listQuery(ctx)
  const keyId = yield* listedKeyId(session, query.keyId)
  const page = yield* (yield* BatchList).list({ keyId, kind: query.kind, limit: query.limit, after: query.after })
  return jsonResponse({ object: "list", ...page }, { headers: NO_STORE })
})

/** The list's view plus what the detail shows: files (OpenAI), where results are (Messages), metadata. */
const detailView = (session: DashboardSession, batch: BatchRecord) =>
  Effect.map(keyLabel(session, batch.keyId), (key) => ({
    object: "dashboard_batch",
    batch: {
      ...batchItem(batch, key),
      inputFileId: batch.inputFileId,
      outputFileId: batch.outputFileId,
      errorFileId: batch.errorFileId,
      resultsPath: batch.kind === "messages" && batch.state.phase === "ended" ? `/v1/messages/batches/${batch.id}/results` : null,
      metadata: batch.metadata ?? null,
      errors: batch.errors ?? null
    }
  }))

const getBatch = Effect.fnUntraced(function*(ctx: RequestContext, session: DashboardSession) {
  yield* requireSurface(session)
  const owner = yield* ownerOf(session, ctx.params.id)
  const batch = yield* (yield* BatchesRepo).get(owner.keyId, owner.kind, ctx.params.id)
  return jsonResponse(yield* detailView(session, batch), { headers: NO_STORE })
})

const cancelBatch = Effect.fnUntraced(function*(ctx: RequestContext, session: DashboardSession) {
  yield* requireSurface(session)
  const owner = yield* ownerOf(session, ctx.params.id)
  const batch = yield* (yield* BatchesRepo).cancel(owner.keyId, owner.kind, ctx.params.id)
  return jsonResponse(yield* detailView(session, batch), { headers: NO_STORE })
})

export const dashboardBatchesRoutes: ReadonlyArray<RouteDef<RouteServices>> = [
  dashboardApi("GET", "/batches", "signed-in", listBatches),
  dashboardApi("GET", "/batches/{id}", "signed-in", getBatch),
  dashboardApi("POST", "/batches/{id}/cancel", "signed-in", cancelBatch)
]
