/**
 * Artifacts (flat surface, Bearer auth, permission surface `artifacts`): upload, describe, query,
 * delete. Every id is scoped to the key: another key's artifact is 404.
 */
import { Effect } from "effect"
import { HttpServerResponse } from "effect/http"
import { Artifacts } from "../artifacts/artifacts.ts"
import { InvalidRequest, NotFound } from "../errors.ts"
import { readJson } from "./body.ts"
import { jsonResponse } from "./json.ts"
import { type RequestContext, requireKey, type RouteDef } from "./route.ts"

const notFound = (id: string) => new NotFound({ kind: "resource", message: `No artifact with id ${id}` })

/** `?version=N` on GET: a positive integer. */
const versionParam = (ctx: RequestContext) => {
  const raw = ctx.query.get("version")
  if (raw === null) return Effect.succeed(undefined)
  return /^[1-9]\d{0,8}$/.test(raw)
    ? Effect.succeed(Number(raw))
    : Effect.fail(new InvalidRequest({ message: `version: expected a positive integer, got ${JSON.stringify(raw)}`, param: "version" }))
}

const upload = Effect.fnUntraced(function*(ctx: RequestContext) {
  const key = yield* requireKey(ctx)
  const artifacts = yield* Artifacts
  const length = ctx.headers["content-length"]
  const uploaded = yield* artifacts.upload(key.id, {
    stream: ctx.request.stream,
    declaredBytes: length === undefined ? undefined : Number(length)
  })
  return jsonResponse({ ...uploaded, persisted: true }, { status: uploaded.deduped ? 200 : 201 })
})

const describe = Effect.fnUntraced(function*(ctx: RequestContext) {
  const key = yield* requireKey(ctx)
  const version = yield* versionParam(ctx)
  const descriptor = yield* (yield* Artifacts).describe(key.id, ctx.params.id, version)
  return jsonResponse({ reference: { artifactId: descriptor.artifactId, version: descriptor.version }, descriptor })
})

const query = Effect.fnUntraced(function*(ctx: RequestContext) {
  const key = yield* requireKey(ctx)
  const body = yield* readJson(ctx, { optional: true })
  const text = yield* (yield* Artifacts).query(key.id, ctx.params.id, body)
  return HttpServerResponse.text(text, { contentType: "application/json" })
})

const remove = Effect.fnUntraced(function*(ctx: RequestContext) {
  const key = yield* requireKey(ctx)
  const removed = yield* (yield* Artifacts).remove(key.id, ctx.params.id)
  if (!removed) return yield* notFound(ctx.params.id)
  return jsonResponse({ deleted: true, artifactId: ctx.params.id })
})

export const artifactsRoutes: ReadonlyArray<RouteDef<Artifacts>> = [
  { method: "POST", path: "/v1/artifacts", shape: "flat", auth: "bearer", surface: "artifacts", handler: upload },
  { method: "GET", path: "/v1/artifacts/{id}", shape: "flat", auth: "bearer", surface: "artifacts", handler: describe },
  { method: "DELETE", path: "/v1/artifacts/{id}", shape: "flat", auth: "bearer", surface: "artifacts", handler: remove },
  { method: "POST", path: "/v1/artifacts/{id}/query", shape: "flat", auth: "bearer", surface: "artifacts", handler: query }
]
