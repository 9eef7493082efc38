/**
 * One handler for every chat dialect: decode the wire body, resolve the model (404), check the key
 * may use it (403) and the model can serve the request (400/422), call it, and encode the answer as
 * one JSON body or as SSE (`chat-answer.ts`: metering, dispatch, keepalives, error events).
 */
import { Effect } from "effect"
import { Catalog } from "../catalog/catalog.ts"
import { prepareRequest } from "../catalog/requirements.ts"
import type { ChatDialect } from "../dialects/dialect.ts"
import { NotFound, PermissionDenied, shown } from "../errors.ts"
import { allowsModel } from "../keys/permissions.ts"
import { readJson } from "./body.ts"
import { answerChat } from "./chat-answer.ts"
import type { RouteServices } from "./route-services.ts"
import { type AuthMode, type ErrorShape, type RequestContext, requireKey, type RouteDef } from "./route.ts"

/** Resolves the model named in a decoded request and checks the key and the model's capabilities. */
export const resolveChatModel = Effect.fnUntraced(function*(ctx: RequestContext, name: string) {
  const catalog = yield* Catalog
  const model = catalog.resolveChat(name)
  ctx.record.modelAsked = name
  if (model === undefined) {
    return yield* new NotFound({ kind: "resource", message: `The model '${shown(name)}' does not exist`, param: "model" })
  }
  if (!allowsModel((yield* requireKey(ctx)).permissions, model.id)) {
    return yield* new PermissionDenied({ message: `This key is not allowed to use the model ${model.id}` })
  }
  ctx.record.model = model.id
  return model
})

const chatHandler = <Echo>(dialect: ChatDialect<Echo>) =>
  Effect.fnUntraced(function*(ctx: RequestContext) {
    const body = yield* readJson(ctx)
    const decoded = yield* dialect.decode(body)
    const model = yield* resolveChatModel(ctx, decoded.request.model)
    const viaHandle = (yield* Catalog).isCompatibilityHandle(decoded.request.model)
    const request = yield* prepareRequest(model, decoded.request, { viaHandle })
    return yield* answerChat(dialect, ctx, request, decoded.echo)
  })

/** A route for a chat dialect's create endpoint. */
export const chatRoute = <Echo>(
  dialect: ChatDialect<Echo>,
  path: string,
  shape: ErrorShape,
  auth: AuthMode
): RouteDef<RouteServices> => ({
  method: "POST",
  path,
  shape,
  auth,
  surface: dialect.surface,
  handler: chatHandler(dialect)
})
