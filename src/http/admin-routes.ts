/**
 * The admin API (`/admin/v1`, `Authorization: Bearer <admin token>`, flat error shape):
 * keys are created (the secret is in that one response only), listed, changed and revoked.
 */
import { Effect } from "effect"
import type { KeyRecord } from "../keys/keys-repo.ts"
import { ApiKeys } from "../keys/api-keys.ts"
import { KeyFields } from "../keys/key-fields.ts"
import { normalizePermissions } from "../keys/permissions.ts"
import { readBody } from "./body.ts"
import { jsonResponse } from "./json.ts"
import type { RequestContext, RouteDef } from "./route.ts"

/** A key as the admin API shows it: never the secret, only its hint. */
export const keyView = (k: KeyRecord) => ({
  id: k.id,
  object: "api_key" as const,
  name: k.name,
  plan: k.plan,
  permissions: k.permissions,
  hint: k.hint,
  createdAt: k.createdAt.toISOString(),
  revokedAt: k.revokedAt === null ? null : k.revokedAt.toISOString(),
  revoked: k.revokedAt !== null
})

// Created and changed with the same fields (all optional), checked as `gateway keys create` checks them.
const readCreate = readBody(KeyFields, { optional: true, storable: true })
const readUpdate = readBody(KeyFields, { storable: true })

const create = Effect.fnUntraced(function*(ctx: RequestContext) {
  const body = yield* readCreate(ctx)
  const keys = yield* ApiKeys
  const { record, secret } = yield* keys.create({
    name: body.name ?? null,
    ...(body.plan === undefined ? {} : { plan: body.plan }),
    ...(body.permissions == null ? {} : { permissions: normalizePermissions(body.permissions) })
  })
  const view = keyView(record)
  return jsonResponse({
    id: view.id, key: secret, name: view.name, plan: view.plan, permissions: view.permissions,
    createdAt: view.createdAt, object: view.object, hint: view.hint
  }, { status: 201 })
})

const list = Effect.fnUntraced(function*() {
  const keys = yield* ApiKeys
  return jsonResponse({ object: "list", data: (yield* keys.list()).map(keyView) })
})

const get = Effect.fnUntraced(function*(ctx: RequestContext) {
  const keys = yield* ApiKeys
  return jsonResponse(keyView(yield* keys.get(ctx.params.id)))
})

const update = Effect.fnUntraced(function*(ctx: RequestContext) {
  const body = yield* readUpdate(ctx)
  const keys = yield* ApiKeys
  const record = yield* keys.update(ctx.params.id, {
    ...(body.plan === undefined ? {} : { plan: body.plan }),
    ...(body.permissions === undefined ? {} : { permissions: normalizePermissions(body.permissions) }),
    ...(body.name === undefined ? {} : { name: body.name })
  })
  return jsonResponse(keyView(record))
})

const revoke = Effect.fnUntraced(function*(ctx: RequestContext) {
  const keys = yield* ApiKeys
  return jsonResponse(keyView(yield* keys.revoke(ctx.params.id)))
})

/** The handlers themselves, for the dashboard's key pages (same validation, same answers). */
export const keyHandlers = { create, list, get, update, revoke }

export const adminRoutes: ReadonlyArray<RouteDef<ApiKeys>> = [
  { method: "POST", path: "/admin/v1/keys", shape: "flat", auth: "admin", handler: create },
  { method: "GET", path: "/admin/v1/keys", shape: "flat", auth: "admin", handler: list },
  { method: "GET", path: "/admin/v1/keys/{id}", shape: "flat", auth: "admin", handler: get },
  { method: "PATCH", path: "/admin/v1/keys/{id}", shape: "flat", auth: "admin", handler: update },
  { method: "DELETE", path: "/admin/v1/keys/{id}", shape: "flat", auth: "admin", handler: revoke }
]
