/**
 * OpenAI-shaped chat surfaces: Chat Completions and legacy completions. Both take the key as
 * `Authorization: Bearer` and answer errors in the OpenAI shape; the generic chat endpoint does
 * the wiring (decode, resolve, requirements, call, encode).
 */
import { chatDialect } from "../dialects/chat/index.ts"
import { completionsDialect } from "../dialects/completions/index.ts"
import { chatRoute } from "./chat-endpoint.ts"
import type { RouteServices } from "./route-services.ts"
import type { RouteDef } from "./route.ts"

export const openaiRoutes: ReadonlyArray<RouteDef<RouteServices>> = [
  chatRoute(chatDialect, "/v1/chat/completions", "openai", "bearer"),
  chatRoute(completionsDialect, "/v1/completions", "openai", "bearer")
]
