/**
 * The Messages surface: `POST /v1/messages` (the generic chat endpoint with the Messages dialect)
 * and `POST /v1/messages/count_tokens`. Both take `x-api-key` or `Authorization: Bearer` and answer
 * errors as `{type: "error", error: {type, message}}`.
 */
import { Effect } from "effect"
import { decodeCountTokens, messagesDialect } from "../dialects/messages/index.ts"
import { countRequestTokens } from "../model/tokens.ts"
import { readJson } from "./body.ts"
import { chatRoute, resolveChatModel } from "./chat-endpoint.ts"
import { jsonResponse } from "./json.ts"
import type { RequestContext, RouteDef } from "./route.ts"
import type { RouteServices } from "./route-services.ts"

/**
 * An estimate over system, messages and tools for the resolved model (404 for an unknown one):
 * the exact o200k count, made in the tokenizer thread (model/tokenizer.ts), so even a 32 MiB
 * body never holds the event loop. Capabilities are not checked: counting an image for a model
 * without vision harms nobody.
 */
const countTokens = Effect.fnUntraced(function*(ctx: RequestContext) {
  const request = yield* Effect.flatMap(readJson(ctx), decodeCountTokens)
  const model = yield* resolveChatModel(ctx, request.model)
  return jsonResponse({ input_tokens: yield* countRequestTokens({ ...request, model: model.id }) })
})

export const messagesRoutes: ReadonlyArray<RouteDef<RouteServices>> = [
  chatRoute(messagesDialect, "/v1/messages", "messages", "messages"),
  { method: "POST", path: "/v1/messages/count_tokens", shape: "messages", auth: "messages", surface: "messages", handler: countTokens }
]
