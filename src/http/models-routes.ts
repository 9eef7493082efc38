/**
 * `GET /v1/models` and `GET /v1/models/{id}`: unauthenticated, cacheable for 300 s, no usage drawn.
 * With the Messages dialect's version header (`messages-version`, or `anthropic-version` as the
 * Anthropic SDK sends it) the list is `{data, has_more, first_id, last_id}`, paged by `limit`,
 * `after_id` and `before_id`.
 */
import { Effect } from "effect"
import { Catalog } from "../catalog/catalog.ts"
import { toCatalogEntry, toMessagesDialectEntry } from "../catalog/entries.ts"
import { InvalidRequest, NotFound, shown } from "../errors.ts"
import { jsonResponse } from "./json.ts"
import type { RequestContext, RouteDef } from "./route.ts"

const CACHE = { "cache-control": "public, max-age=300" }

const wantsMessagesDialect = (ctx: RequestContext) =>
  ctx.headers["messages-version"] !== undefined || ctx.headers["anthropic-version"] !== undefined

const pageLimit = (raw: string | null) => {
  if (raw === null) return Effect.succeed(20)
  const n = Number(raw)
  return Number.isInteger(n) && n >= 1 && n <= 1000
    ? Effect.succeed(n)
    : Effect.fail(new InvalidRequest({ message: "limit: must be an integer from 1 to 1000", param: "limit" }))
}

const list = Effect.fnUntraced(function*(ctx: RequestContext) {
  const catalog = yield* Catalog
  if (!wantsMessagesDialect(ctx)) {
    return jsonResponse({ object: "list", data: catalog.listed.map(toCatalogEntry) }, { headers: CACHE })
  }
  const limit = yield* pageLimit(ctx.query.get("limit"))
  const ids = catalog.listed.map((e) => e.model.id)
  const afterId = ctx.query.get("after_id")
  const beforeId = ctx.query.get("before_id")
  let start = 0
  let end = ids.length
  if (afterId !== null) {
    const i = ids.indexOf(afterId)
    if (i < 0) return yield* new InvalidRequest({ message: `after_id: unknown model id ${afterId}`, param: "after_id" })
    start = i + 1
  }
  if (beforeId !== null) {
    const i = ids.indexOf(beforeId)
    if (i < 0) return yield* new InvalidRequest({ message: `before_id: unknown model id ${beforeId}`, param: "before_id" })
    end = i
  }
  // Paging backwards (only before_id) returns the page just before the cursor.
  const window = afterId === null && beforeId !== null
    ? catalog.listed.slice(Math.max(start, end - limit), end)
    : catalog.listed.slice(start, Math.min(end, start + limit))
  const data = window.map(toMessagesDialectEntry)
  const hasMore = afterId === null && beforeId !== null
    ? end - limit > start
    : start + limit < end
  return jsonResponse({
    data,
    has_more: hasMore,
    first_id: data.length > 0 ? data[0].id : null,
    last_id: data.length > 0 ? data[data.length - 1].id : null
  }, { headers: CACHE })
})

const get = Effect.fnUntraced(function*(ctx: RequestContext) {
  const catalog = yield* Catalog
  const id = ctx.params.id
  const entry = catalog.resolveForCatalog(id)
  if (entry === undefined) return yield* new NotFound({ kind: "resource", message: `Model '${shown(id)}' not found` })
  const body = wantsMessagesDialect(ctx) ? toMessagesDialectEntry(entry) : toCatalogEntry(entry)
  return jsonResponse(body, { headers: CACHE })
})

export const modelsRoutes: ReadonlyArray<RouteDef<Catalog>> = [
  { method: "GET", path: "/v1/models", shape: "openai", auth: "none", handler: list },
  { method: "GET", path: "/v1/models/{id}", shape: "openai", auth: "none", handler: get }
]
