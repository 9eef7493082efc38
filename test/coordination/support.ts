/** The coordination stores a suite runs against: in-process always, Redis when reachable. */
import { Effect, Layer } from "effect"
import { randomBytes } from "node:crypto"
import { Redis } from "ioredis"
import { inject } from "vitest"
import { Coordination } from "../../src/coordination/coordination.ts"
import { makeInProcess } from "../../src/coordination/in-process.ts"

export interface Store {
  readonly name: "in-process" | "redis"
  /**
   * A store with nothing in it: a fresh map, or Redis under a key prefix of its own. `wipe` loses
   * everything in it, as FLUSHALL or a restart without persistence would (Redis: only this prefix).
   */
  fresh(): { readonly layer: Layer.Layer<Coordination>; readonly prefix: string; readonly wipe: Effect.Effect<void> }
}

export const uniquePrefix = () => `gwtest:${randomBytes(5).toString("hex")}:`

/** Deletes every key under `prefix` (best effort: leftovers all carry TTLs). */
export const dropPrefix = (url: string, prefix: string) =>
  Effect.promise(async () => {
    const redis = new Redis(url, { maxRetriesPerRequest: 1 })
    try {
      const keys = await redis.keys(`${prefix}*`)
      if (keys.length > 0) await redis.del(...keys)
    } finally {
      redis.disconnect()
    }
  })

/** A Redis layer under a fresh prefix, whose keys are dropped when the layer closes. */
export const redisLayer = (url: string, prefix = uniquePrefix()) =>
  Layer.effectDiscard(Effect.addFinalizer(() => dropPrefix(url, prefix))).pipe(
    Layer.provideMerge(Coordination.layerRedis(url, { prefix }))
  )

export const stores = (): ReadonlyArray<Store> => {
  const { redisUrl } = inject("services")
  const inProcess: Store = {
    name: "in-process",
    fresh: () => {
      const store = makeInProcess()
      return { layer: Layer.succeed(Coordination, store), prefix: "", wipe: Effect.sync(() => store.wipe()) }
    }
  }
  if (redisUrl === null) return [inProcess]
  return [inProcess, {
    name: "redis",
    fresh: () => {
      const prefix = uniquePrefix()
      return { layer: redisLayer(redisUrl, prefix), prefix, wipe: dropPrefix(redisUrl, prefix) }
    }
  }]
}
