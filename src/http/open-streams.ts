/**
 * Where a started SSE answer goes on being written once its handler has returned (`writeSse` in
 * node-sse.ts): the scope its writer's fiber runs in. The server provides one that closes after
 * its graceful stop (the listener's layer): a stream still open then is interrupted, which charges
 * what it delivered, frees its slot and writes its log line, before storage and Redis close.
 * Without the server there is no scope (the default): a writer then runs detached — only the
 * gateway's own node:http listener writes answers this way.
 */
import { Context, Effect, Layer, type Scope } from "effect"

export const OpenStreams = Context.Reference<Scope.Scope | undefined>("gateway/http/OpenStreams", { defaultValue: () => undefined })

/** The scope of the layer that provides it: closed when that layer is released. */
export const OpenStreamsLive = Layer.effect(OpenStreams, Effect.scope)
