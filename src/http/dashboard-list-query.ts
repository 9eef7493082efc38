/**
 * What the dashboard's cross-key lists (artifacts, batches) share: the page size and cursor read
 * from the query, whose rows a session may list, and the label of the key that owns a row.
 */
import { Effect } from "effect"
import type { DashboardSession } from "../dashboard/sessions.ts"
import { NotFound } from "../errors.ts"
import { ApiKeys } from "../keys/api-keys.ts"
import type { RequestContext } from "./route.ts"
import { limitParam } from "./limit-param.ts"

const LIST_LIMIT = { default: 25, max: 100 }

/** `limit` (1–100, default 25), `after` (the last id of the previous page) and `keyId`. */
export const listPage = Effect.fnUntraced(function*(ctx: RequestContext) {
  const limit = yield* limitParam(ctx, LIST_LIMIT)
  return { limit, after: ctx.query.get("after") || undefined, keyId: ctx.query.get("keyId") || undefined }
})

/**
 * The key whose rows to list: a key's session lists only its own (another `keyId` is 404, as any
 * other key's id is), the operator the asked one or every key's.
 */
export const listedKeyId = (session: DashboardSession, asked: string | undefined): Effect.Effect<string | undefined, NotFound> => {
  if (session.role !== "key") return Effect.succeed(asked)
  return asked === undefined || asked === session.key.id
    ? Effect.succeed(session.key.id)
    : Effect.fail(new NotFound({ kind: "resource", message: `No key with id ${asked}`, param: "keyId" }))
}

/** The owning key's name and hint (null for a key that no longer exists). */
export const keyLabel = Effect.fnUntraced(function*(session: DashboardSession, keyId: string) {
  if (session.role === "key") return { name: session.key.name, hint: session.key.hint as string | null }
  const key = yield* Effect.option((yield* ApiKeys).get(keyId))
  return key._tag === "Some" ? { name: key.value.name, hint: key.value.hint as string | null } : { name: null, hint: null }
})
