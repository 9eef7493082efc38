/** The `limit` query parameter of every paged list: an integer from 1 to `max`, else a 400 naming it. */
import { Effect } from "effect"
import { InvalidRequest } from "../errors.ts"
import type { RequestContext } from "./route.ts"

export interface ListLimit {
  readonly default: number
  readonly max: number
}

export const limitParam = (ctx: RequestContext, limits: ListLimit): Effect.Effect<number, InvalidRequest> => {
  const text = ctx.query.get("limit")
  const limit = text === null ? limits.default : Number(text)
  return Number.isInteger(limit) && limit >= 1 && limit <= limits.max
    ? Effect.succeed(limit)
    : Effect.fail(new InvalidRequest({ message: `limit: expected an integer from 1 to ${limits.max}`, param: "limit" }))
}
